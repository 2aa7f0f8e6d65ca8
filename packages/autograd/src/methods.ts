import { add, div, mul, type Operand, pow, sub } from './ops/arithmetic.js';
import { matmul } from './ops/matmul.js';
import { max, mean, min, type ReduceOptions, sum } from './ops/reduce.js';
import { flatten, permute, reshape, squeeze, transpose, unsqueeze } from './ops/shape.js';
import { abs, exp, log, neg, sqrt, square } from './ops/unary.js';
import { Tensor } from './tensor.js';

// Torch-like method forms of the ops (x.add(y), x.sum({ dim: 1 })...), attached to the prototype.
declare module './tensor.js' {
  interface Tensor {
    add(other: Operand): Tensor;
    sub(other: Operand): Tensor;
    mul(other: Operand): Tensor;
    div(other: Operand): Tensor;
    pow(exponent: Operand): Tensor;
    matmul(other: Tensor, opts?: { transposeA?: boolean; transposeB?: boolean }): Tensor;
    neg(): Tensor;
    exp(): Tensor;
    log(): Tensor;
    sqrt(): Tensor;
    square(): Tensor;
    abs(): Tensor;
    sum(opts?: ReduceOptions): Tensor;
    mean(opts?: ReduceOptions): Tensor;
    max(opts?: ReduceOptions): Tensor;
    min(opts?: ReduceOptions): Tensor;
    reshape(shape: number[]): Tensor;
    view(shape: number[]): Tensor;
    permute(dims: number[]): Tensor;
    transpose(dim0?: number, dim1?: number): Tensor;
    unsqueeze(dim: number): Tensor;
    squeeze(dim?: number): Tensor;
    flatten(startDim?: number, endDim?: number): Tensor;
  }
}

type Method = (this: Tensor, ...args: never[]) => Tensor;
const methods: Record<string, Method> = {
  add(o: Operand) { return add(this, o); },
  sub(o: Operand) { return sub(this, o); },
  mul(o: Operand) { return mul(this, o); },
  div(o: Operand) { return div(this, o); },
  pow(e: Operand) { return pow(this, e); },
  matmul(o: Tensor, opts?: { transposeA?: boolean; transposeB?: boolean }) { return matmul(this, o, opts); },
  neg() { return neg(this); },
  exp() { return exp(this); },
  log() { return log(this); },
  sqrt() { return sqrt(this); },
  square() { return square(this); },
  abs() { return abs(this); },
  sum(opts?: ReduceOptions) { return sum(this, opts); },
  mean(opts?: ReduceOptions) { return mean(this, opts); },
  max(opts?: ReduceOptions) { return max(this, opts); },
  min(opts?: ReduceOptions) { return min(this, opts); },
  reshape(shape: number[]) { return reshape(this, shape); },
  view(shape: number[]) { return reshape(this, shape); },
  permute(dims: number[]) { return permute(this, dims); },
  transpose(d0?: number, d1?: number) { return transpose(this, d0, d1); },
  unsqueeze(dim: number) { return unsqueeze(this, dim); },
  squeeze(dim?: number) { return squeeze(this, dim); },
  flatten(s?: number, e?: number) { return flatten(this, s, e); },
};
Object.assign(Tensor.prototype, methods);

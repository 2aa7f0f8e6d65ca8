import type { tf } from '@ddp/tensor';
import { gelu, logSigmoid, relu, sigmoid, tanh } from './ops/activation.js';
import { add, div, mul, type Operand, pow, sub } from './ops/arithmetic.js';
import { clamp } from './ops/clamp.js';
import { chunk, indexSelect, narrow, slice, split } from './ops/indexing.js';
import { matmul } from './ops/matmul.js';
import { l2Normalize } from './ops/norm.js';
import { max, mean, min, type ReduceDims, sum } from './ops/reduce.js';
import { expand, flatten, pad, permute, reshape, squeeze, transpose, unsqueeze } from './ops/shape.js';
import { logSoftmax, logsumexp, softmax } from './ops/softmax.js';
import { argmax, argmin, std, type VarOptions, variance } from './ops/statistics.js';
import { abs, exp, log, neg, sqrt, square } from './ops/unary.js';
import { maskedFill } from './ops/where.js';
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
    sum(dims?: ReduceDims, keepdim?: boolean): Tensor;
    mean(dims?: ReduceDims, keepdim?: boolean): Tensor;
    max(dims?: ReduceDims, keepdim?: boolean): Tensor;
    min(dims?: ReduceDims, keepdim?: boolean): Tensor;
    /** `x.reshape([4, 3])` or torch's `x.reshape(4, 3)`. */
    reshape(...shape: Sizes): Tensor;
    view(...shape: Sizes): Tensor;
    permute(...dims: Sizes): Tensor;
    transpose(dim0?: number, dim1?: number): Tensor;
    unsqueeze(dim: number): Tensor;
    squeeze(dim?: number): Tensor;
    flatten(startDim?: number, endDim?: number): Tensor;
    tanh(): Tensor;
    sigmoid(): Tensor;
    relu(): Tensor;
    gelu(opts?: { approximate?: 'none' | 'tanh' }): Tensor;
    logSigmoid(): Tensor;
    softmax(dim?: number): Tensor;
    logSoftmax(dim?: number): Tensor;
    split(splitSizeOrSizes: number | number[], dim?: number): Tensor[];
    chunk(chunks: number, dim?: number): Tensor[];
    slice(begin: number[], size: number[]): Tensor;
    narrow(dim: number, start: number, length: number): Tensor;
    indexSelect(dim: number, indices: number[] | tf.Tensor | Tensor): Tensor;
    pad(paddings: [number, number][], value?: number): Tensor;
    maskedFill(mask: Tensor | tf.Tensor, value: number): Tensor;
    l2Normalize(dim?: number, eps?: number): Tensor;
    clamp(min?: number | null, max?: number | null): Tensor;
    argmax(dim?: number, keepdim?: boolean): Tensor;
    argmin(dim?: number, keepdim?: boolean): Tensor;
    /** torch's forms: `x.var()`, `x.var(false)`, `x.var(1, false, true)` (dim, unbiased, keepdim), or options. */
    var(dims?: ReduceDims | VarOptions | boolean, unbiased?: boolean, keepdim?: boolean): Tensor;
    std(dims?: ReduceDims | VarOptions | boolean, unbiased?: boolean, keepdim?: boolean): Tensor;
    logsumexp(dim: number | number[], keepdim?: boolean): Tensor;
    /** `x.expand([2, -1, 3])` or torch's `x.expand(2, -1, 3)`. */
    expand(...sizes: Sizes): Tensor;
  }
}

type Method = (this: Tensor, ...args: never[]) => Tensor | Tensor[];

/** Sizes given as one array or as numbers (torch's `x.view(4, 3)`). */
type Sizes = [number[]] | number[];
const sizes = (given: Sizes): number[] => (Array.isArray(given[0]) ? given[0] : (given as number[]));
const methods: Record<string, Method> = {
  add(o: Operand) {
    return add(this, o);
  },
  sub(o: Operand) {
    return sub(this, o);
  },
  mul(o: Operand) {
    return mul(this, o);
  },
  div(o: Operand) {
    return div(this, o);
  },
  pow(e: Operand) {
    return pow(this, e);
  },
  matmul(o: Tensor, opts?: { transposeA?: boolean; transposeB?: boolean }) {
    return matmul(this, o, opts);
  },
  neg() {
    return neg(this);
  },
  exp() {
    return exp(this);
  },
  log() {
    return log(this);
  },
  sqrt() {
    return sqrt(this);
  },
  square() {
    return square(this);
  },
  abs() {
    return abs(this);
  },
  sum(dims?: ReduceDims, keepdim?: boolean) {
    return sum(this, dims, keepdim);
  },
  mean(dims?: ReduceDims, keepdim?: boolean) {
    return mean(this, dims, keepdim);
  },
  max(dims?: ReduceDims, keepdim?: boolean) {
    return max(this, dims, keepdim);
  },
  min(dims?: ReduceDims, keepdim?: boolean) {
    return min(this, dims, keepdim);
  },
  reshape(...shape: Sizes) {
    return reshape(this, sizes(shape));
  },
  view(...shape: Sizes) {
    return reshape(this, sizes(shape));
  },
  permute(...dims: Sizes) {
    return permute(this, sizes(dims));
  },
  transpose(d0?: number, d1?: number) {
    return transpose(this, d0, d1);
  },
  unsqueeze(dim: number) {
    return unsqueeze(this, dim);
  },
  squeeze(dim?: number) {
    return squeeze(this, dim);
  },
  flatten(s?: number, e?: number) {
    return flatten(this, s, e);
  },
  tanh() {
    return tanh(this);
  },
  sigmoid() {
    return sigmoid(this);
  },
  relu() {
    return relu(this);
  },
  gelu(opts?: { approximate?: 'none' | 'tanh' }) {
    return gelu(this, opts);
  },
  logSigmoid() {
    return logSigmoid(this);
  },
  softmax(dim?: number) {
    return softmax(this, dim);
  },
  logSoftmax(dim?: number) {
    return logSoftmax(this, dim);
  },
  split(s: number | number[], dim?: number) {
    return split(this, s, dim);
  },
  chunk(chunks: number, dim?: number) {
    return chunk(this, chunks, dim);
  },
  slice(begin: number[], size: number[]) {
    return slice(this, begin, size);
  },
  narrow(dim: number, start: number, length: number) {
    return narrow(this, dim, start, length);
  },
  indexSelect(dim: number, idx: number[] | tf.Tensor | Tensor) {
    return indexSelect(this, dim, idx);
  },
  pad(p: [number, number][], value?: number) {
    return pad(this, p, value);
  },
  maskedFill(mask: Tensor | tf.Tensor, value: number) {
    return maskedFill(this, mask, value);
  },
  l2Normalize(dim?: number, eps?: number) {
    return l2Normalize(this, dim, eps);
  },
  clamp(lo?: number | null, hi?: number | null) {
    return clamp(this, lo, hi);
  },
  argmax(dim?: number, keepdim?: boolean) {
    return argmax(this, dim, keepdim);
  },
  argmin(dim?: number, keepdim?: boolean) {
    return argmin(this, dim, keepdim);
  },
  var(dims?: ReduceDims | VarOptions | boolean, unbiased?: boolean, keepdim?: boolean) {
    return variance(this, dims, unbiased, keepdim);
  },
  std(dims?: ReduceDims | VarOptions | boolean, unbiased?: boolean, keepdim?: boolean) {
    return std(this, dims, unbiased, keepdim);
  },
  logsumexp(dim: number | number[], keepdim?: boolean) {
    return logsumexp(this, dim, keepdim);
  },
  expand(...given: Sizes) {
    return expand(this, sizes(given));
  },
};
Object.assign(Tensor.prototype, methods);

import type { DataType } from '@tensorflow/tfjs-core';
import { runOnCpuWhen, someInput } from './run-on-cpu.js';

/**
 * tfjs-wasm 4.22 kernels that read an input of these dtypes as another type's bytes: exp of a
 * bool gave 3.6e-41, neg, relu and abs of a bool uninitialised bytes, sqrt of an int32 4.5e8,
 * ceil of a bool wrote out of bounds, an int32 mod trapped on a zero divisor, prelu read an
 * int32 as float bits, a strided slice of an int32 came back float32 bits, where() over bool values
 * aborted the wasm module (the process died). With an input of a listed dtype they run on the cpu
 * backend, tfjs's reference (found by sweeping every op against cpu: wasm-dtypes.test.ts); float32,
 * and the dtypes a kernel handles, stay on wasm.
 */
const WRONG_DTYPES: Record<string, readonly DataType[]> = {
  Abs: ['bool'],
  Acos: ['bool', 'int32'],
  Acosh: ['bool', 'int32'],
  All: ['int32'],
  Any: ['int32'],
  Asin: ['bool', 'int32'],
  Asinh: ['bool', 'int32'],
  Atan: ['bool'],
  Atan2: ['bool'],
  Atanh: ['bool', 'int32'],
  Ceil: ['bool', 'int32'],
  Cos: ['bool', 'int32'],
  Cosh: ['bool', 'int32'],
  Cumprod: ['bool'],
  Cumsum: ['bool'],
  Elu: ['int32'],
  Erf: ['bool', 'int32'],
  Exp: ['bool'],
  Expm1: ['bool', 'int32'],
  Floor: ['bool', 'int32'],
  FloorDiv: ['bool', 'int32'],
  IsFinite: ['int32'],
  IsNan: ['int32'],
  LeakyRelu: ['bool'],
  Log: ['bool', 'int32'],
  LogicalNot: ['int32'],
  Mod: ['bool', 'int32'],
  Neg: ['bool'],
  Pow: ['int32'],
  Prelu: ['bool', 'int32'],
  Prod: ['bool'],
  RealDiv: ['bool'],
  Reciprocal: ['bool', 'int32'],
  Relu: ['bool'],
  Reverse: ['bool'],
  Round: ['bool'],
  Rsqrt: ['bool', 'int32'],
  Select: ['bool'],
  Selu: ['bool'],
  Sigmoid: ['bool', 'int32'],
  Sinh: ['bool'],
  Softplus: ['bool'],
  Sqrt: ['bool', 'int32'],
  Square: ['bool'],
  Step: ['bool', 'int32'],
  StridedSlice: ['bool', 'int32'],
  Sub: ['bool'],
  Sum: ['bool'],
  Tan: ['int32'],
  Tanh: ['bool', 'int32'],
  TopK: ['bool'],
};

/** The inputs whose dtype decides, where not all do (Select's condition is always bool, and fine). */
const DECIDING_INPUTS: Record<string, readonly string[]> = { Select: ['t', 'e'] };

/** Routes each WRONG_DTYPES kernel to cpu when a deciding input has one of its dtypes. */
export function registerDtypeFallbacks(): void {
  for (const [name, dtypes] of Object.entries(WRONG_DTYPES)) {
    const deciding = DECIDING_INPUTS[name];
    runOnCpuWhen(name, (args) =>
      someInput(args, (t, n) => dtypes.includes(t.dtype) && (!deciding || deciding.includes(n))),
    );
  }
}

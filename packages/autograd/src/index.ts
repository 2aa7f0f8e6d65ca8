import './methods.js';

export { Tensor, type RemovableHandle } from './tensor.js';
export { Function, FunctionNode, type GradResult } from './function.js';
export { Context, Node, AccumulateGrad, type Edge, type TensorHook, type PostAccumulateGradHook } from './node.js';
export { backward, queueCallback, type BackwardOptions } from './engine.js';
export { noGrad, enableGrad, isGradEnabled } from './grad-mode.js';
export { tidy } from './scope.js';
export { AutogradError, AutogradArgumentError, GraphFreedError, TensorDisposedError } from './errors.js';
export { tensor, fromTf, zeros, ones, full, randn, rand, type CreateOptions } from './creation.js';
export { sumToShape } from './ops/broadcast.js';
export { add, sub, mul, div, pow, type Operand } from './ops/arithmetic.js';
export { neg, exp, log, sqrt, square, abs } from './ops/unary.js';
export { matmul } from './ops/matmul.js';
export { sum, mean, max, min, type ReduceOptions } from './ops/reduce.js';
export { reshape, permute, transpose, unsqueeze, squeeze, flatten } from './ops/shape.js';
export { gradcheck, type GradcheckOptions, type GradcheckResult } from './gradcheck.js';

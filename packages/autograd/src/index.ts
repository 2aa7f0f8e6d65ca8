import './methods.js';

export { type AutocastDtype, type AutocastOptions, autocast, autocastDtype, roundToPrecision } from './autocast.js';
export {
  currentBackward,
  pendingValueWriter,
  pendingWriter,
  queueCallback,
  type Writes,
  whileWriting,
} from './backward-run.js';
export { checkpoint, type RngStateSource, registerCheckpointRngState } from './checkpoint.js';
export { allGather, allReduce, broadcast, type DiffReduceOp, reduceScatter } from './collectives.js';
export { type CreateOptions, fromTf, full, ones, rand, randn, tensor, zeros } from './creation.js';
export { type BackwardOptions, backward } from './engine.js';
export {
  AutogradArgumentError,
  AutogradError,
  GradientHookError,
  GraphFreedError,
  refusePromises,
  TensorDisposedError,
} from './errors.js';
export { freedParameterProblem } from './freed.js';
export { AutogradFunction, Function, FunctionNode, type GradResult } from './function.js';
export { enableGrad, isGradEnabled, noGrad } from './grad-mode.js';
export { type GradcheckOptions, type GradcheckResult, gradcheck } from './gradcheck.js';
export { claimGradientReduction, gradientReducer, releaseGradientReduction } from './gradient-owners.js';
export {
  firstSplitAmong,
  gradientShardGroups,
  markGradientShard,
  markParameterShard,
  type NormReduceGroup,
  type ParameterShard,
  parameterShardOf,
  unmarkGradientShard,
} from './gradient-shards.js';
export { GradientSnapshot } from './gradient-snapshot.js';
export { AccumulateGrad, Context, type Edge, Node, type PostAccumulateGradHook, type TensorHook } from './node.js';
export { gelu, logSigmoid, relu, sigmoid, tanh } from './ops/activation.js';
export { add, div, mul, type Operand, pow, sub } from './ops/arithmetic.js';
export { sumToShape } from './ops/broadcast.js';
export { clamp } from './ops/clamp.js';
export { conv2d, maxPool2d, type Pair } from './ops/conv.js';
export { dropout } from './ops/dropout.js';
export type { Indices } from './ops/index-tensor.js';
export {
  cat,
  chunk,
  chunkSizes,
  concat,
  embedding,
  indexSelect,
  narrow,
  slice,
  split,
  stack,
} from './ops/indexing.js';
export { crossEntropy, mse, type Reduction } from './ops/loss.js';
export { linear, matmul } from './ops/matmul.js';
export { withMeanCounts } from './ops/mean-counts.js';
export { batchNormStats, l2Normalize, layerNorm } from './ops/norm.js';
export { max, mean, min, type ReduceOptions, sum } from './ops/reduce.js';
export { expand, flatten, pad, permute, reshape, squeeze, transpose, unsqueeze } from './ops/shape.js';
export { logSoftmax, logsumexp, softmax } from './ops/softmax.js';
export { argmax, argmin, std, type VarOptions, variance } from './ops/statistics.js';
export { abs, exp, log, neg, sqrt, square } from './ops/unary.js';
export { maskedFill, where } from './ops/where.js';
export { getRngState, manualSeed, setRngState } from './random.js';
export { type SavedTensorHooks, withSavedTensorHooks } from './saved-tensor-hooks.js';
export { tidy } from './scope.js';
export { type RemovableHandle, Tensor } from './tensor.js';

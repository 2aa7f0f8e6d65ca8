import * as tf from '@tensorflow/tfjs-core';
import { initBackend } from './backend.js';

export {
  decodeBfloat16,
  decodeFloat16,
  encodeBfloat16,
  encodeFloat16,
  float16BitsToNumber,
  float32BitsToBfloat16,
  float32BitsToFloat16,
} from '@ddp/half';
export { BackendError, type BackendName, getBackend, initBackend, setBackend } from './backend.js';
export {
  bytesPerElement,
  DTYPES,
  type DType,
  DTypeError,
  type DTypeInfo,
  dtypeInfo,
  isDType,
  type TypedArray,
  tensorFromTypedArray,
  tensorToTypedArray,
  tensorToTypedArraySync,
} from './dtype.js';
export { EmptyReductionError, FusedOpError, IndexBoundsError } from './errors.js';
export {
  biasAdd,
  channelSum,
  gelu,
  geluGrad,
  type LayerNormGrads,
  type LayerNormResult,
  layerNorm,
  layerNormGrad,
  reluGrad,
  softmax,
  softmaxGrad,
} from './fused-ops.js';
export { sumInDouble } from './long-sums.js';
export { moments } from './moments.js';
export { type AdamScalars, fusedAdamStep } from './native-adam.js';
export { type Conv2dGrads, type Conv2dSpec, nativeConv2d, nativeConv2dGrads } from './native-conv-nchw.js';
export {
  convTakesNCHW,
  getNumThreads,
  nativeKernelsSummary,
  setNumThreads,
  useNativeKernels,
} from './native-kernels.js';
export { checkBooleanOptions, checkNumberOptions, checkOptionNames, checkOptionValue } from './options.js';
export { type HalfPrecision, roundBitsToHalf, roundToPrecision } from './round-half.js';
export { getTransferStats, ownedHeapView, type TransferStats, writeInPlace } from './storage.js';
export { storageViews } from './storage-views.js';
export { copyTensorInto, tensorFromFloat32 } from './transfer.js';
export { wasmHeapBuffer } from './wasm-heap.js';
export { tf };

// Importing @ddp/tensor leaves a ready backend behind, so callers never race its async init.
await initBackend();

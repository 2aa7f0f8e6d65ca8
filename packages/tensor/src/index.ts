import * as tf from '@tensorflow/tfjs-core';
import { initBackend } from './backend.js';

export { tf };
export { FusedOpError } from './errors.js';
export { BackendError, type BackendName, getBackend, initBackend, setBackend } from './backend.js';
export { type AdamScalars, fusedAdamStep } from './native-adam.js';
export {
  biasAdd,
  channelSum,
  gelu,
  geluGrad,
  layerNorm,
  layerNormGrad,
  type LayerNormGrads,
  type LayerNormResult,
  reluGrad,
  softmax,
  softmaxGrad,
} from './fused-ops.js';
export { copyTensorInto, tensorFromFloat32 } from './transfer.js';
export { convTakesNCHW, getNumThreads, nativeKernelsSummary, setNumThreads, useNativeKernels } from './native-kernels.js';
export { getTransferStats, type TransferStats, writeInPlace } from './storage.js';
export {
  bytesPerElement,
  DTYPES,
  type DType,
  DTypeError,
  type DTypeInfo,
  dtypeInfo,
  isDType,
  tensorFromTypedArray,
  tensorToTypedArray,
  tensorToTypedArraySync,
  type TypedArray,
} from './dtype.js';
export {
  decodeBfloat16,
  decodeFloat16,
  encodeBfloat16,
  encodeFloat16,
  float16BitsToNumber,
  float32BitsToBfloat16,
  float32BitsToFloat16,
} from '@ddp/half';

export { ownedHeapView } from './storage.js';
export { wasmHeapBuffer } from './wasm-heap.js';

// Importing @ddp/tensor leaves a ready backend behind, so callers never race its async init.
await initBackend();

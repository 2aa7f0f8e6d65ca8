/** Raised when a requested backend is unknown or cannot be initialised, or its settings are wrong. */
export class BackendError extends Error {
  override name = 'BackendError';
}

/** Raised when a fused op (layerNorm, gelu, softmax and their gradients) gets tensors of the wrong shape. */
export class FusedOpError extends Error {
  override name = 'FusedOpError';
}

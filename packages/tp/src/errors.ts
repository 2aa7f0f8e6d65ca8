/** Bad tensor-parallel setup: a size not divisible by the tp world size, an unsupported layer option. */
export class TensorParallelError extends Error {
  override name = 'TensorParallelError';
}

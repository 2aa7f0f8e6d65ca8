import { tf } from './index.js';

/** Raised by expectNoLeaks when a function leaves tensors behind. */
export class TensorLeakError extends Error {
  override name = 'TensorLeakError';
  constructor(
    readonly leaked: number,
    label: string,
  ) {
    super(`${label} leaked ${leaked} tensor(s): tf.memory().numTensors went up by ${leaked}`);
  }
}

export interface LeakCheckOptions {
  /** Calls of `fn` before counting, so lazily created caches are not taken for leaks. */
  warmup?: number;
  /** Name of the thing checked, for the error message. */
  label?: string;
}

/**
 * How many more tensors are alive after `fn` (awaited if async) than before it.
 * Tensors `fn` returns count too: dispose them inside `fn`.
 */
export async function countTensorsDelta(fn: () => unknown, options: LeakCheckOptions = {}): Promise<number> {
  for (let i = 0; i < (options.warmup ?? 0); i++) await fn();
  const before = tf.memory().numTensors;
  await fn();
  return tf.memory().numTensors - before;
}

/** Throws TensorLeakError if `fn` (awaited if async) leaves more tensors alive than it found. */
export async function expectNoLeaks(fn: () => unknown, options: LeakCheckOptions = {}): Promise<void> {
  const delta = await countTensorsDelta(fn, options);
  if (delta > 0) throw new TensorLeakError(delta, options.label ?? 'function');
}

import { checkNumberOptions, tf } from '@ddp/tensor';
import { AutogradArgumentError, argumentError, checkOptions } from './errors.js';
import { checkInt32Values } from './int32-range.js';
import { nextSeed } from './random.js';
import { Tensor } from './tensor.js';

/** Options of the creation functions. */
export interface CreateOptions {
  requiresGrad?: boolean;
  dtype?: 'float32' | 'int32' | 'bool';
}

const CREATE = ['requiresGrad', 'dtype'];
const DTYPES: readonly string[] = ['float32', 'int32', 'bool'];
/** The dtype of a created tensor, once its options are known good. */
function createdDtype(where: string, opts: CreateOptions): 'float32' | 'int32' | 'bool' {
  checkOptions(where, opts, CREATE, ['requiresGrad']);
  const dtype = opts.dtype ?? 'float32';
  // a torch name (float64, int64, float16) reached tfjs as an untyped "Unknown data type"
  if (!DTYPES.includes(dtype))
    throw new AutogradArgumentError(`${where}: dtype ${String(dtype)} is not one of ${DTYPES.join(', ')}`);
  return dtype;
}

/** A tensor from nested arrays or a typed array (with its shape), like torch.tensor. */
export function tensor(values: tf.TensorLike, shape?: number[], opts: CreateOptions = {}): Tensor {
  const dtype = createdDtype('tensor', opts);
  if (dtype === 'int32') checkInt32Values('tensor', values);
  return new Tensor(tf.tensor(values, shape, dtype), opts);
}

/** Wraps a tf.Tensor; the new Tensor takes ownership of it. */
export function fromTf(data: tf.Tensor, opts: { requiresGrad?: boolean } = {}): Tensor {
  checkOptions('fromTf', opts, ['requiresGrad'], ['requiresGrad']);
  return new Tensor(data, opts);
}

export const zeros = (shape: number[], opts: CreateOptions = {}): Tensor =>
  new Tensor(tf.zeros(shape, createdDtype('zeros', opts)), opts);
export const ones = (shape: number[], opts: CreateOptions = {}): Tensor =>
  new Tensor(tf.ones(shape, createdDtype('ones', opts)), opts);
export function full(shape: number[], value: number, opts: CreateOptions = {}): Tensor {
  const dtype = createdDtype('full', opts);
  if (dtype === 'int32') checkInt32Values('full', value);
  return new Tensor(tf.fill(shape, value, dtype), opts);
}

/**
 * A seed as tfjs's normal sampler needs it: it takes 0 for "no seed" (`seed ? seed : Math.random()`), so seed 0
 * drew another stream on every call, on every rank; its stream is alea(String(seed)), and '0' names seed 0's.
 */
export const normalSeed = (seed: number): number => (seed === 0 ? ('0' as unknown as number) : seed);

/** Standard-normal float32 samples; without `seed` the seed comes from manualSeed's stream. */
export function randn(shape: number[], opts: { requiresGrad?: boolean; seed?: number } = {}): Tensor {
  checkOptions('randn', opts, ['requiresGrad', 'seed'], ['requiresGrad']);
  checkNumberOptions('randn', opts, ['seed'], argumentError);
  return new Tensor(tf.randomNormal(shape, 0, 1, 'float32', normalSeed(opts.seed ?? nextSeed())), opts);
}

/** Uniform float32 samples in [low, high); without `seed` the seed comes from manualSeed's stream. */
export function rand(
  shape: number[],
  opts: { requiresGrad?: boolean; seed?: number; low?: number; high?: number } = {},
): Tensor {
  checkOptions('rand', opts, ['requiresGrad', 'seed', 'low', 'high'], ['requiresGrad']);
  // a string low concatenated in tfjs's low + (high − low)·u: low '1' drew from [10, 11)
  checkNumberOptions('rand', opts, ['seed', 'low', 'high'], argumentError);
  return new Tensor(tf.randomUniform(shape, opts.low ?? 0, opts.high ?? 1, 'float32', opts.seed ?? nextSeed()), opts);
}

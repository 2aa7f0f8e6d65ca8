import { tf } from '@ddp/tensor';
import { Tensor } from './tensor.js';

/** Options of the creation functions. */
export interface CreateOptions {
  requiresGrad?: boolean;
  dtype?: 'float32' | 'int32' | 'bool';
}

/** A tensor from nested arrays or a typed array (with its shape), like torch.tensor. */
export function tensor(values: tf.TensorLike, shape?: number[], opts: CreateOptions = {}): Tensor {
  return new Tensor(tf.tensor(values, shape, opts.dtype ?? 'float32'), opts);
}

/** Wraps a tf.Tensor; the new Tensor takes ownership of it. */
export function fromTf(data: tf.Tensor, opts: { requiresGrad?: boolean } = {}): Tensor {
  return new Tensor(data, opts);
}

export const zeros = (shape: number[], opts: CreateOptions = {}): Tensor =>
  new Tensor(tf.zeros(shape, opts.dtype ?? 'float32'), opts);
export const ones = (shape: number[], opts: CreateOptions = {}): Tensor =>
  new Tensor(tf.ones(shape, opts.dtype ?? 'float32'), opts);
export const full = (shape: number[], value: number, opts: CreateOptions = {}): Tensor =>
  new Tensor(tf.fill(shape, value, opts.dtype ?? 'float32'), opts);

/** Standard-normal samples; pass seed for reproducible values. */
export const randn = (shape: number[], opts: CreateOptions & { seed?: number } = {}): Tensor =>
  new Tensor(tf.randomNormal(shape, 0, 1, 'float32', opts.seed), opts);

/** Uniform samples in [low, high); pass seed for reproducible values. */
export const rand = (
  shape: number[],
  opts: CreateOptions & { seed?: number; low?: number; high?: number } = {},
): Tensor => new Tensor(tf.randomUniform(shape, opts.low ?? 0, opts.high ?? 1, 'float32', opts.seed), opts);

import { readFileSync } from 'node:fs';
import { tf } from '@ddp/tensor';

/** A golden tensor as written by PyTorch: row-major data and its shape. */
export interface GoldenTensor {
  shape: number[];
  data: number[];
}

/** Reads src/fixtures/<name>.json (PyTorch's reference values; format in that folder's README). */
export function loadFixture<T = Record<string, unknown>>(name: string): T {
  return JSON.parse(readFileSync(new URL(`../fixtures/${name}.json`, import.meta.url), 'utf8')) as T;
}

export function goldenToTf(t: GoldenTensor): tf.Tensor {
  return tf.tensor(t.data, t.shape, 'float32');
}

/** Largest |a − b| over two equally long arrays. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}

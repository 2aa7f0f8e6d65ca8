// Test-only helpers shared by the suites (not exported from the package).
import { expect } from 'vitest';
import { rand, randn } from '../creation.js';
import { type GradcheckOptions, gradcheck } from '../gradcheck.js';
import type { Tensor } from '../tensor.js';

/** Disposes every tensor given (test cleanup). */
export function disposeAll(...tensors: { dispose(): void }[]): void {
  for (const t of tensors) t.dispose();
}

/** Elementwise toBeCloseTo over two arrays of the same length. */
export function expectAllClose(got: ArrayLike<number>, want: ArrayLike<number>, digits: number): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++) expect(got[i]).toBeCloseTo(want[i], digits);
}

let seed = 100;

/** A random leaf requiring grad: standard normal, or uniform in [0.5, 2) when positive. */
export const leaf = (shape: number[], positive = false): Tensor =>
  positive
    ? rand(shape, { low: 0.5, high: 2, requiresGrad: true, seed: seed++ })
    : randn(shape, { requiresGrad: true, seed: seed++ });

/** Asserts backward() matches central differences for fn at inputs, then disposes them. */
export async function expectGradsMatch(
  fn: (...xs: Tensor[]) => Tensor,
  inputs: Tensor[],
  opts?: GradcheckOptions,
): Promise<void> {
  const r = await gradcheck(fn, inputs, opts);
  disposeAll(...inputs);
  expect(r.ok, r.message).toBe(true);
}

let shapeState = 12345;
/** A reproducible random shape of the given rank, each dim in [lo, hi]. */
export function randomShape(rank: number, lo = 1, hi = 4): number[] {
  return Array.from({ length: rank }, () => {
    shapeState = (Math.imul(shapeState, 1103515245) + 12345) >>> 0;
    return lo + ((shapeState >>> 16) % (hi - lo + 1));
  });
}

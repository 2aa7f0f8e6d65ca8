import { describe, expect, it } from 'vitest';
import { div, std, sum, tensor, variance } from '../index.js';

/** Inputs as float32 holds them, and statistics of those in float64 (the truth torch's CPU kernels approach). */
function float32Rows(rows: number, cols: number, at: (r: number, c: number) => number): number[][] {
  return Array.from({ length: rows }, (_, r) => Array.from({ length: cols }, (_, c) => Math.fround(at(r, c))));
}
const meanOf = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const varianceOf = (xs: number[]) => {
  const m = meanOf(xs);
  return xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1);
};

describe('statistics of data far from zero, against float64 (probe DC)', () => {
  // 1e4 ± 1e-2: the float32 mean is off by up to half its ulp (5e-4), which the squares gained: 2.8e-3
  // relative (torch float32: 3e-8)
  it('variance and std of 1e4 + small noise: within 1e-5 of float64, gradients too', async () => {
    const columns = float32Rows(2, 128, (r, c) => 1e4 + 1e-2 * Math.sin(7 * c + r + 0.3 * c * c));
    const x = tensor(columns.flat(), [2, 128], { requiresGrad: true });
    const v = variance(x, 1);
    const s = std(x, 1);
    const want = columns.map(varianceOf);
    for (const [i, got] of [...v.dataSync()].entries()) expect(Math.abs(got / want[i] - 1)).toBeLessThan(1e-5);
    for (const [i, got] of [...s.dataSync()].entries())
      expect(Math.abs(got / Math.sqrt(want[i]) - 1)).toBeLessThan(1e-5);
    // d var / dx = 2 (x − mean) / (n − 1)
    await sum(v).backward();
    const grad = [...(x.grad?.dataSync() ?? [])];
    const wantGrad = columns.flatMap((row) => row.map((xi) => (2 * (xi - meanOf(row))) / 127));
    const worst = Math.max(...wantGrad.map((g, i) => Math.abs(grad[i] - g)));
    expect(worst / Math.max(...wantGrad.map(Math.abs))).toBeLessThan(1e-5);
  });
});

describe("div's gradient for the denominator at float32's ends (probe DC)", () => {
  it('as torch: −dy·((a/b)/b), finite where b² overflows or underflows', async () => {
    const a = tensor([1e20, 3e19, 1e-20, 1], [4], { requiresGrad: true });
    const b = tensor([1e20, 3e19, 1e-25, 4e-20], [4], { requiresGrad: true });
    await sum(div(a, b)).backward();
    // torch 1.13: [-1e-20, -3.3333e-20, -1e30, -inf] (the last is beyond float32 in exact arithmetic too)
    const got = [...(b.grad?.dataSync() ?? [])];
    const want = [-1e-20, -3.3333333e-20, -1e30];
    for (const [i, w] of want.entries()) expect(Math.abs(got[i] / w - 1), `b = ${b.dataSync()[i]}`).toBeLessThan(1e-6);
    expect(got[3]).toBe(Number.NEGATIVE_INFINITY);
  });
});

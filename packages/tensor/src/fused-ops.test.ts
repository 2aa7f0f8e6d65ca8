import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { FusedOpError } from './errors.js';
import { gelu, geluGrad, getBackend, layerNorm, layerNormGrad, setBackend, softmax, softmaxGrad, tf, useNativeKernels } from './index.js';

interface Stored { shape: number[]; data: number[] }
interface Case { name: string; eps?: number; inputs: Record<string, Stored>; outputs: Record<string, Stored> }
/** PyTorch 1.13's values (src/fixtures/make_fused_fixtures.py). */
const fixtures = JSON.parse(readFileSync(new URL('./fixtures/fused_ops.json', import.meta.url), 'utf8')) as Record<
  'layerNorm' | 'gelu' | 'softmax',
  Case[]
>;

const initial = getBackend();
afterAll(async () => {
  useNativeKernels(true);
  await setBackend(initial as 'wasm');
});

/** The paths every fused op takes: tfjs ops on cpu and on wasm. */
const paths: [string, () => Promise<void>][] = [
  ['cpu', async () => setBackend('cpu')],
  ['wasm (tfjs ops)', async () => { await setBackend('wasm'); useNativeKernels(false); }],
];

const load = (s: Stored) => tf.tensor(s.data, s.shape, 'float32');

/** Runs `op` on the case's inputs; returns its outputs' values and how many tensors it left behind. */
function run(c: Case, op: (inputs: Record<string, tf.Tensor>) => Record<string, tf.Tensor>) {
  const inputs = Object.fromEntries(Object.entries(c.inputs).map(([k, v]) => [k, load(v)]));
  const before = tf.memory().numTensors;
  const outs = op(inputs);
  const left = tf.memory().numTensors - before - Object.keys(outs).length;
  const values = Object.fromEntries(Object.entries(outs).map(([k, t]) => [k, { shape: t.shape, data: Array.from(t.dataSync()) }]));
  tf.dispose([...Object.values(inputs), ...Object.values(outs)]);
  return { values, left };
}

/** Within float32 rounding of PyTorch's float64 values: |got − want| ≤ 2e-5 + 2e-5·|want|. */
function expectClose(got: Record<string, Stored>, want: Record<string, Stored>) {
  for (const [name, w] of Object.entries(want)) {
    const g = got[name]!;
    expect(g.shape, name).toEqual(w.shape);
    const worst = Math.max(0, ...g.data.map((v, i) => Math.abs(v - w.data[i]!) - 2e-5 * Math.abs(w.data[i]!)));
    expect(worst, `${name}: largest error beyond the relative part`).toBeLessThanOrEqual(2e-5);
  }
}

describe.each(paths)('fused ops on %s', (_path, select) => {
  it.each(fixtures.layerNorm.map((c) => [c.name, c] as const))('layerNorm and layerNormGrad, %s: PyTorch values', async (_n, c) => {
    await select();
    const forward = run(c, ({ x, gamma, beta }) => ({ ...layerNorm(x!, gamma!, beta!, c.eps!) }));
    expectClose(forward.values, { y: c.outputs.y!, mean: c.outputs.mean!, rstd: c.outputs.rstd! });
    const { mean, rstd } = c.outputs;
    const backward = run({ ...c, inputs: { ...c.inputs, mean: mean!, rstd: rstd! } }, ({ dy, x, mean, rstd, gamma }) => ({
      ...layerNormGrad(dy!, x!, mean!, rstd!, gamma!),
    }));
    expectClose(backward.values, { dx: c.outputs.dx!, dgamma: c.outputs.dgamma!, dbeta: c.outputs.dbeta! });
    expect([forward.left, backward.left]).toEqual([0, 0]);
  });

  it.each(fixtures.gelu.map((c) => [c.name, c] as const))('gelu and geluGrad, %s: PyTorch values', async (_n, c) => {
    await select();
    const r = run(c, ({ x, dy }) => ({ y: gelu(x!), dx: geluGrad(dy!, x!) }));
    expectClose(r.values, c.outputs);
    expect(r.left).toBe(0);
  });

  it.each(fixtures.softmax.map((c) => [c.name, c] as const))('softmax and softmaxGrad, %s: PyTorch values', async (_n, c) => {
    await select();
    const r = run(c, ({ x, dy }) => {
      const y = softmax(x!);
      return { y, dx: softmaxGrad(dy!, y) };
    });
    expectClose(r.values, c.outputs);
    expect(r.left).toBe(0);
  });

  it('rejects tensors of the wrong shape with FusedOpError, leaving nothing behind', async () => {
    await select();
    const x = tf.ones([2, 3]);
    const wrong = tf.ones([2]);
    const stats = tf.ones([2, 1]);
    const gamma = tf.ones([3]);
    const scalar = tf.scalar(1);
    const before = tf.memory().numTensors;
    expect(() => layerNorm(x, wrong, wrong, 1e-5)).toThrow(FusedOpError);
    expect(() => layerNorm(x, gamma, wrong, 1e-5)).toThrow(/beta has shape \[2\], expected \[3\]/);
    expect(() => layerNormGrad(x, x, wrong, stats, gamma)).toThrow(/mean has shape \[2\], expected \[2, 1\]/);
    expect(() => geluGrad(wrong, x)).toThrow(FusedOpError);
    expect(() => softmaxGrad(wrong, x)).toThrow(FusedOpError);
    expect(() => softmax(scalar)).toThrow(/at least one axis/);
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([x, wrong, stats, gamma, scalar]);
  });
});

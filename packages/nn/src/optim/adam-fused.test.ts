import { Tensor } from '@ddp/autograd';
import { setBackend, tf, useNativeKernels } from '@ddp/tensor';
import { afterAll, describe, expect, it } from 'vitest';
import { Adam, AdamW } from './adam.js';

const native = useNativeKernels(true);
afterAll(() => useNativeKernels(native));

/**
 * Five steps on three parameters (the last past several vector widths, with a remainder) with fixed
 * gradients; the final parameters and moments as bits.
 */
function trajectory(make: (params: Tensor[]) => Adam | AdamW) {
  const params = [[3, 5], [7], [37, 29]].map((shape, i) => {
    const values = Float32Array.from(
      { length: tf.util.sizeFromShape(shape) },
      (_, j) => Math.sin(1 + i * 9 + j * 0.7) * 3,
    );
    return new Tensor(tf.tensor(values, shape), { requiresGrad: true });
  });
  const optimizer = make(params);
  const before = tf.memory().numTensors;
  for (let step = 0; step < 5; step++) {
    const grads = params.map((p, i) => tf.tidy(() => tf.mul(tf.cos(tf.add(p.data, step + i)), 1e-3 * 10 ** step)));
    for (const [i, p] of params.entries()) p.grad = grads[i];
    optimizer.step();
    optimizer.zeroGrad();
    tf.dispose(grads);
  }
  const grown = tf.memory().numTensors - before; // the moments: two per parameter
  const bits = [
    ...params.map((p) => p.data),
    ...[...optimizer.state.values()].flatMap((s) => [s.expAvg, s.expAvgSq]),
  ].map((t) => Array.from(new Uint32Array((t as tf.Tensor).dataSync().buffer)));
  for (const p of params) p.dispose();
  optimizer.dispose();
  return { bits, grown };
}

const cases: [string, (p: Tensor[]) => Adam | AdamW][] = [
  ['AdamW, weight decay', (p) => new AdamW(p, { lr: 2e-3, betas: [0.9, 0.98], eps: 1e-6, weightDecay: 0.1 })],
  ['AdamW, no weight decay', (p) => new AdamW(p, { lr: 1e-2, weightDecay: 0 })],
  ['Adam', (p) => new Adam(p, { lr: 3e-2 })],
  // torch.lerp's second formula (weight 1 − β1 ≥ 0.5)
  ['Adam, β1 = 0', (p) => new Adam(p, { lr: 3e-2, betas: [0, 0.99] })],
  // 1 − β1 is 0.5 only once rounded to float32: the formula chosen on the float32 weight, as the kernel does
  ['Adam, β1 just above 0.5', (p) => new Adam(p, { lr: 3e-2, betas: [0.5 + 2 ** -27, 0.99] })],
];

describe.skipIf(!native)('Adam(W) in one native pass', () => {
  it.each(cases)('%s: the same bits as the tfjs ops, no tensors left over', async (_name, make) => {
    await setBackend('wasm');
    useNativeKernels(false);
    const ops = trajectory(make);
    useNativeKernels(true);
    const fused = trajectory(make);
    expect(fused.grown).toBe(6);
    expect(fused.bits).toEqual(ops.bits);
  });
});

// probe BY, torch 1.13's values: d² overflowed float32 (an infinite second moment froze the parameter for good);
// with β1 = 0 the moment lost a small gradient against a large one (m0 + (d − m0)·1)
describe.each([true, false])('Adam against torch at the edges (native kernels: %s)', (useNative) => {
  const run = (values: number[], betas: [number, number], grads: number[][]) => {
    const before = useNativeKernels(useNative && native);
    const p = new Tensor(tf.tensor(values), { requiresGrad: true });
    const adam = new Adam([p], { lr: 0.1, betas });
    for (const g of grads) {
      p.grad = tf.tensor(g);
      adam.step();
    }
    const state = adam.state.get(p)!;
    const out = [p.data, state.expAvg, state.expAvgSq].map((t) => Array.from((t as tf.Tensor).dataSync()));
    adam.dispose();
    p.dispose();
    useNativeKernels(before);
    return out;
  };

  it('one gradient of 1e20 then ones: the moment stays finite and the parameter moves on', () => {
    const [param, , expAvgSq] = run([1], [0.9, 0.999], [[1e20], ...Array(9).fill([1])]);
    expect(param[0]).toBeCloseTo(0.5812388, 5);
    expect(expAvgSq[0] / 9.910361824572474e36).toBeCloseTo(1, 5);
  });

  it('β1 = 0: the first moment is the gradient itself', () => {
    const grads = [
      [1, 1000],
      [1e-8, 1e-3],
    ];
    const [param, expAvg] = run([1, 1], [0, 0.99], grads);
    expect(expAvg).toEqual([Math.fround(1e-8), Math.fround(1e-3)]);
    expect(param[0]).toBeCloseTo(0.8999999761581421, 7);
    expect(run([1, 1], [0, 0], grads)[0].map((v) => Math.fround(v))).toEqual([
      Math.fround(0.8499999642372131),
      Math.fround(0.8000009655952454),
    ]);
  });
});

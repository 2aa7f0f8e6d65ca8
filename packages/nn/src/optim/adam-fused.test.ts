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

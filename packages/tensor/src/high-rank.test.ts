import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, setBackend, tf } from './index.js';

const initial = getBackend();
afterAll(() => setBackend(initial as 'wasm'));

const shape = [2, 1, 2, 1, 2, 1, 3];
const a = () =>
  tf.tensor(
    Array.from({ length: 24 }, (_, i) => Math.sin(i + 1) * 3),
    shape,
  );
const b = () =>
  tf.tensor(
    Array.from({ length: 24 }, (_, i) => Math.cos(i) + 2),
    shape,
  );
/** Ops of rank-7 operands a training graph makes (and pad): wasm's XNNPACK kernels left their output unwritten. */
const ops: Record<string, (x: tf.Tensor, y: tf.Tensor) => tf.Tensor> = {
  add: (x, y) => tf.add(x, y),
  sub: (x, y) => tf.sub(x, y),
  mul: (x, y) => tf.mul(x, y),
  div: (x, y) => tf.div(x, y),
  squaredDifference: (x, y) => tf.squaredDifference(x, y),
  broadcastAdd: (x, y) => tf.add(x, tf.slice(y, [0, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 3])),
  scalarMul: (x) => tf.mul(x, tf.scalar(2)),
  pad: (x) =>
    tf.pad(
      x,
      [
        [0, 0],
        [0, 0],
        [0, 0],
        [0, 0],
        [0, 0],
        [0, 1],
        [1, 0],
      ],
      7,
    ),
  maximum: (x, y) => tf.maximum(x, y),
  pow: (x, y) => tf.pow(y, x),
  where: (x, y) => tf.where(tf.greater(x, 0), x, y),
  transpose: (x) => tf.transpose(x, [6, 5, 4, 3, 2, 1, 0]),
  concat: (x, y) => tf.concat([x, y], 4),
  tile: (x) => tf.tile(x, [1, 2, 1, 1, 1, 2, 1]),
  sum: (x) => tf.sum(x, 6),
  exp: (x) => tf.exp(x),
  prelu: (x, y) => tf.prelu(x, y),
  floorDiv: (x, y) => tf.floorDiv(x, y),
  mod: (x, y) => tf.mod(x, y),
  minimum: (x, y) => tf.minimum(x, y),
  sigmoid: (x) => tf.sigmoid(x),
  neg: (x) => tf.neg(x),
  logicalAnd: (x, y) => tf.cast(tf.logicalAnd(tf.greater(x, 0), tf.greater(y, 2)), 'float32'),
  notEqual: (x, y) => tf.cast(tf.notEqual(x, y), 'float32'),
};

// probe CZ: add, sub, mul, div, squaredDifference and pad of rank 7 on wasm returned uninitialised memory
describe('rank-7 operands on wasm give what cpu gives', () => {
  it.each(Object.keys(ops))('%s', async (name) => {
    const results: number[][] = [];
    for (const backend of ['cpu', 'wasm'] as const) {
      await setBackend(backend);
      results.push(tf.tidy(() => Array.from(ops[name](a(), b()).dataSync())));
    }
    // within float32 rounding (the native exp is not cpu's), not uninitialised memory
    results[1].forEach((v, i) => {
      expect(Math.abs(v - results[0][i])).toBeLessThanOrEqual(1e-6 * Math.abs(results[0][i]));
    });
  });
});

// probe CZ: a negative axis corrupted wasm's heap (later ops crashed) and gave no values on cpu; torch counts it
// from the end
describe.each(['wasm', 'cpu'] as const)('cumsum and cumprod with a negative axis on %s', (backend) => {
  it('count it from the end, as torch', async () => {
    await setBackend(backend);
    const x = tf.tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    expect(tf.tidy(() => Array.from(tf.cumsum(x, -1).dataSync()))).toEqual([1, 3, 6, 4, 9, 15]);
    expect(tf.tidy(() => Array.from(tf.cumprod(x, -2).dataSync()))).toEqual([1, 2, 3, 4, 10, 18]);
    x.dispose();
  });
});

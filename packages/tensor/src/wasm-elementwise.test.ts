import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, setBackend, tf } from './index.js';

const initial = getBackend();
afterAll(() => setBackend(initial as 'wasm'));

const values = (t: tf.Tensor) => Array.from(t.dataSync() as ArrayLike<number>);
const f32 = (xs: number[]) => Array.from(Float32Array.from(xs));

// Expected values are torch 1.13's for x = [1e-30, -1e-7, 1e-38, 0, NaN, 0.5, -2.5].
describe.each(['wasm', 'cpu'] as const)('elementwise kernels on %s as torch', (backend) => {
  const x = () => tf.tensor([1e-30, -1e-7, 1e-38, 0, Number.NaN, 0.5, -2.5]);

  it('sign of small values is ±1 (wasm: 0 below ~1e-6, so abs had no gradient there)', async () => {
    await setBackend(backend);
    expect(tf.tidy(() => values(tf.sign(x())))).toEqual([1, -1, 1, 0, 0, 1, -1]);
  });

  it('clipByValue and relu6 keep NaN (wasm: a bound, hiding the NaN)', async () => {
    await setBackend(backend);
    expect(tf.tidy(() => values(tf.clipByValue(x(), -1, 1)))).toEqual(
      f32([1e-30, -1e-7, 1e-38, 0, Number.NaN, 0.5, -1]),
    );
    expect(tf.tidy(() => values(tf.relu6(x())))).toEqual(f32([1e-30, 0, 1e-38, 0, Number.NaN, 0.5, 0]));
  });

  it('maximum and minimum propagate NaN from either operand (wasm: maximum(1, NaN) was 1)', async () => {
    await setBackend(backend);
    const [a, b] = [tf.tensor([Number.NaN, 1, 2]), tf.tensor([1, Number.NaN, -1])];
    expect(tf.tidy(() => [values(tf.maximum(a, b)), values(tf.minimum(a, b))])).toEqual([
      [Number.NaN, Number.NaN, 2],
      [Number.NaN, Number.NaN, -1],
    ]);
    tf.dispose([a, b]);
  });

  it('log1p and sin keep their digits near 0 (wasm: log1p(1e-30) = 0, sin(-1e-7) = -3e-7)', async () => {
    await setBackend(backend);
    const [l, s] = tf.tidy(() => [values(tf.log1p(x())), values(tf.sin(x()))]);
    expect([l[0], l[1], s[0], s[1]]).toEqual(f32([1e-30, -1.000000082740371e-7, 1e-30, -1e-7]));
    expect(l[5]).toBeCloseTo(0.40546509623527527, 7);
    expect(s.slice(5)).toEqual(f32([0.4794255495071411, -0.5984721183776855]));
  });

  it('a cast to bool is x != 0, NaN true (wasm: truncated to a byte, 0.5 false and -2.5 254)', async () => {
    await setBackend(backend);
    expect(tf.tidy(() => values(tf.cast(x(), 'bool')))).toEqual([1, 1, 1, 0, 1, 1, 1]);
    expect(tf.tidy(() => values(tf.cast(tf.tensor([256, 0, -1], undefined, 'int32'), 'bool')))).toEqual([1, 0, 1]);
    expect(tf.tidy(() => values(tf.cast(x(), 'int32')))).toEqual([0, 0, 0, 0, 0, 0, -2]); // other casts unchanged
  });
});

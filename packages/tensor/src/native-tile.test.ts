import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, setBackend, tf, useNativeKernels } from './index.js';

const initial = getBackend();
const native = useNativeKernels(true);
afterAll(async () => {
  useNativeKernels(true);
  await setBackend(initial as 'wasm');
});

/** [name, shape, reps, dtype] */
const cases: [string, number[], number[], 'float32' | 'int32' | 'bool'][] = [
  ['one value over an attention mask', [1, 1, 1, 1], [8, 4, 32, 32], 'float32'],
  ['a mask over batch and heads', [1, 1, 3, 3], [2, 4, 1, 1], 'bool'],
  ['every dimension repeated', [2, 3, 4], [3, 2, 2], 'float32'],
  ['inner dimension only', [3, 5], [1, 4], 'int32'],
  ['no repeats', [4, 2], [1, 1], 'float32'],
  ['a zero repeat', [2, 3], [0, 2], 'float32'],
  ['a vector', [7], [3], 'bool'],
  // the addon takes ranks 1–9: above, wasm's kernel (probe DI: `expand` of a rank-10 tensor raised)
  ['rank 10', [1, 1, 1, 1, 1, 1, 1, 1, 2, 3], [2, 1, 1, 1, 1, 1, 1, 1, 1, 2], 'float32'],
  ['rank 11', [2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2], [1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1], 'int32'],
];

function tile(shape: number[], reps: number[], dtype: 'float32' | 'int32' | 'bool') {
  const x = tf.tensor(
    Array.from({ length: tf.util.sizeFromShape(shape) }, (_, i) =>
      dtype === 'bool' ? Number(i % 3 === 0) : i * 1.5 - 2,
    ),
    shape,
    dtype,
  );
  const before = tf.memory().numTensors;
  const y = tf.tile(x, reps);
  const left = tf.memory().numTensors - before - 1;
  const out = { shape: y.shape, dtype: y.dtype, values: Array.from(y.dataSync()), left };
  tf.dispose([x, y]);
  return out;
}

describe.skipIf(!native)('native Tile', () => {
  it.each(cases)('%s: the same as wasm and cpu', async (_name, shape, reps, dtype) => {
    await setBackend('cpu');
    const onCpu = tile(shape, reps, dtype);
    await setBackend('wasm');
    useNativeKernels(false);
    const onWasm = tile(shape, reps, dtype);
    useNativeKernels(true);
    const onNative = tile(shape, reps, dtype);
    expect(onNative.left).toBe(0);
    expect(onNative).toEqual({ ...onCpu, left: 0 });
    expect(onNative).toEqual({ ...onWasm, left: 0 });
  });

  it('broadcastTo runs through it', async () => {
    await setBackend('wasm');
    const y = tf.broadcastTo(tf.tensor([[1], [2]]), [2, 2, 3]);
    expect(Array.from(y.dataSync())).toEqual([1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2]);
    y.dispose();
  });
});

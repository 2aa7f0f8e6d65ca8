import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, setBackend, tf, useNativeKernels } from './index.js';

const initial = getBackend();
// tfjs-wasm's own kernel under the untransposed route: the path without @ddp/native-kernels
const native = useNativeKernels(false);
afterAll(async () => {
  useNativeKernels(native);
  await setBackend(initial as 'wasm');
});

const values = (shape: number[], seed: number) =>
  tf.tensor(
    Array.from({ length: tf.util.sizeFromShape(shape) }, (_, i) => Math.sin(seed + i * 0.37)),
    shape,
  );

/** Every transpose combination, with shapes where either the direct or the swapped form is cheaper. */
const cases: [string, number[], number[], boolean, boolean][] = [
  ['x·Wᵀ (swapped form)', [3, 5], [7, 5], false, true],
  ['dyᵀ·x (direct form)', [6, 3], [6, 4], true, false],
  ['Aᵀ·Bᵀ', [5, 2], [9, 5], true, true],
  ['batched x·Wᵀ', [2, 3, 5], [2, 7, 5], false, true],
  ['batched Aᵀ·B', [2, 5, 3], [2, 5, 4], true, false],
  ['wide·tallᵀ', [1, 64], [40, 64], false, true],
];

describe('wasm matmul with transposed operands', () => {
  it.each(cases)('%s equals the cpu result', async (_name, sa, sb, ta, tb) => {
    const run = async () => {
      const [a, b] = [values(sa, 1), values(sb, 2)];
      const before = tf.memory().numTensors;
      const c = tf.matMul(a, b, ta, tb);
      expect(tf.memory().numTensors).toBe(before + 1); // the kernel's temporaries are freed
      const out = { shape: c.shape, data: Array.from(await c.data()) };
      tf.dispose([a, b, c]);
      return out;
    };
    await setBackend('cpu');
    const onCpu = await run();
    await setBackend('wasm');
    const onWasm = await run();
    expect(onWasm.shape).toEqual(onCpu.shape);
    const worst = Math.max(...onWasm.data.map((v, i) => Math.abs(v - onCpu.data[i]) / (1 + Math.abs(onCpu.data[i]))));
    expect(worst).toBeLessThan(1e-5);
  });
});

import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, getNumThreads, setBackend, setNumThreads, tf, useNativeKernels } from './index.js';

const initial = getBackend();
const initialThreads = getNumThreads();
const native = useNativeKernels(true);
afterAll(async () => {
  useNativeKernels(true);
  setNumThreads(initialThreads);
  await setBackend(initial as 'wasm');
});

/** Exp's edges (underflow to 0, overflow to Infinity, NaN, -Infinity) and a smooth range. */
function values(n: number): tf.Tensor {
  const edges = [
    0,
    -0,
    1,
    -1,
    88.7,
    89,
    -87,
    -104,
    -200,
    Number.NaN,
    Number.NEGATIVE_INFINITY,
    Number.POSITIVE_INFINITY,
  ];
  return tf.tensor([...edges, ...Array.from({ length: n - edges.length }, (_, i) => Math.sin(i * 0.37) * 20)]);
}

function exp(n: number) {
  const x = values(n);
  const before = tf.memory().numTensors;
  const y = tf.exp(x);
  const left = tf.memory().numTensors - before - 1;
  const out = { values: Array.from(y.dataSync()), left };
  tf.dispose([x, y]);
  return out;
}

describe.skipIf(!native)('native Exp', () => {
  // below and above the size at which the kernel shares the values among threads
  it.each([100, 70_000])('%i values: as wasm and cpu within float32 rounding, at 1 and 2 threads', async (n) => {
    await setBackend('cpu');
    const onCpu = exp(n);
    await setBackend('wasm');
    useNativeKernels(false);
    const onWasm = exp(n);
    useNativeKernels(true);
    for (const threads of [1, 2]) {
      setNumThreads(threads);
      const got = exp(n);
      expect(got.left).toBe(0);
      for (const want of [onCpu, onWasm]) {
        for (const [i, v] of got.values.entries()) {
          const w = want.values[i];
          if (!Number.isFinite(w) || w === 0) expect(v, `value ${i}`).toBe(w);
          else expect(Math.abs(v - w) / w, `value ${i}`).toBeLessThan(2e-6);
        }
      }
    }
  });

  it('leaves int32 to tfjs', async () => {
    await setBackend('wasm');
    useNativeKernels(true);
    const x = tf.tensor([0, 1, 2], [3], 'int32');
    const y = tf.exp(x);
    expect(y.dtype).toBe('float32');
    expect(Array.from(y.dataSync())).toEqual(Array.from(Float32Array.of(1, Math.E, Math.exp(2))));
    tf.dispose([x, y]);
  });
});

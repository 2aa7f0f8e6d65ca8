import { describe, expect, it } from 'vitest';
import { BackendError, type BackendName, getBackend, initBackend, setBackend, tf } from './index.js';

describe('backend selection', () => {
  it('defaults to wasm (or native/DDP_BACKEND) and switches on request', async () => {
    expect(getBackend()).toBe(process.env.DDP_BACKEND ?? (getBackend() === 'tensorflow' ? 'tensorflow' : 'wasm'));
    await setBackend('wasm');
    expect(getBackend()).toBe('wasm');
    expect(Array.from(await tf.add(tf.tensor([1, 2]), tf.tensor([3, 4])).data())).toEqual([4, 6]);
    await setBackend('cpu');
    expect(getBackend()).toBe('cpu');
  });

  it('rejects unknown backends from the API and from DDP_BACKEND', async () => {
    await expect(setBackend('webgl' as BackendName)).rejects.toThrow(BackendError);
    const saved = process.env.DDP_BACKEND;
    process.env.DDP_BACKEND = 'gpu';
    try {
      await expect(initBackend()).rejects.toThrow(/DDP_BACKEND=gpu is not a backend/);
      process.env.DDP_BACKEND = 'cpu';
      expect(await initBackend()).toBe('cpu');
    } finally {
      if (saved === undefined) delete process.env.DDP_BACKEND;
      else process.env.DDP_BACKEND = saved;
    }
  });

  it('runs the conv2d weight and gather gradients on wasm like on cpu', async () => {
    const run = () =>
      tf.tidy(() => {
        const x = tf.tensor4d(
          Array.from({ length: 2 * 5 * 5 * 3 }, (_, i) => Math.sin(i)),
          [2, 5, 5, 3],
        );
        const dy = tf.tensor4d(
          Array.from({ length: 2 * 5 * 5 * 4 }, (_, i) => Math.cos(i)),
          [2, 5, 5, 4],
        );
        const attrs = {
          strides: [1, 1],
          pad: 'same',
          dataFormat: 'NHWC',
          dimRoundingMode: undefined,
          filterShape: [3, 3, 3, 4],
        };
        const dw = tf
          .engine()
          .runKernel('Conv2DBackpropFilter', { x, dy }, attrs as unknown as tf.NamedAttrMap) as tf.Tensor;
        const rows = tf.tensor2d(
          Array.from({ length: 12 }, (_, i) => i),
          [4, 3],
        );
        const dtable = tf.unsortedSegmentSum(rows, tf.tensor1d([0, 2, 2, 3], 'int32'), 5);
        return [Array.from(dw.dataSync()), Array.from(dtable.dataSync())];
      });
    await setBackend('cpu');
    const onCpu = run();
    await setBackend('wasm');
    const before = tf.memory().numTensors;
    const onWasm = run();
    expect(tf.memory().numTensors).toBe(before);
    expect(onWasm[1]).toEqual(onCpu[1]);
    for (const [i, v] of (onWasm[0] ?? []).entries()) expect(v).toBeCloseTo(onCpu[0]?.[i], 4);
  });
});

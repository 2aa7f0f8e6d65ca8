import { describe, expect, it } from 'vitest';
import { OUTPUT_ALIGNMENT } from './aligned-output.js';
import { tf, useNativeKernels } from './index.js';
import { activeWasmBackend, heapOffset } from './wasm-heap.js';

// first in this file, before anything else frees wasm memory: Emscripten's _free is still its
// replace-itself stub here, the case where a wrapper around the stub was dropped on first use
const native = useNativeKernels(true);

describe.skipIf(!native)('native outputs on 64-byte boundaries', () => {
  it('a product starts on a cache line whatever malloc returned; disposing frees the block malloc gave', () => {
    const backend = activeWasmBackend()!;
    const heapBytes = () => backend.wasm.HEAPU8.length;
    const tensors = tf.memory().numTensors;
    const misaligned = new Set<number>();
    let grownAfterWarmUp = 0;
    for (let round = 0; round < 40; round++) {
      // odd sizes, so that tfjs's own (8-byte aligned) allocations in between move malloc's blocks around
      const a = tf.randomNormal([3 + (round % 5), 7 + round]);
      const b = tf.randomNormal([7 + round, 5 + (round % 3)]);
      const before = heapBytes();
      const c = tf.matMul(a, b);
      const offset = heapOffset(backend, c)!;
      expect(offset % OUTPUT_ALIGNMENT).toBe(0);
      const odd = tf.zeros([1 + round]); // an 8-byte aligned block: what makeAlignedOutput must step over
      misaligned.add(heapOffset(backend, odd)! % OUTPUT_ALIGNMENT);
      tf.dispose([a, b, c, odd]);
      if (round >= 10 && heapBytes() !== before) grownAfterWarmUp++;
    }
    // the test saw malloc return blocks that were not aligned, so the shifted offsets were freed too
    expect([...misaligned].some((m) => m !== 0)).toBe(true);
    expect(grownAfterWarmUp).toBe(0);
    expect(tf.memory().numTensors).toBe(tensors);
  });

  it('an aligned output holds the product: the same values as tfjs-wasm, after blocks were freed and reused', async () => {
    const a = tf.randomNormal([33, 65], 0, 1, 'float32', 3);
    const b = tf.randomNormal([33, 17], 0, 1, 'float32', 4);
    for (let i = 0; i < 5; i++) tf.matMul(a, b, true, false).dispose();
    const ours = await tf.matMul(a, b, true, false).data();
    useNativeKernels(false);
    const wasm = await tf.matMul(a, b, true, false).data();
    useNativeKernels(true);
    for (let i = 0; i < wasm.length; i++) expect(ours[i]).toBeCloseTo(wasm[i], 4);
    tf.dispose([a, b]);
  });
});

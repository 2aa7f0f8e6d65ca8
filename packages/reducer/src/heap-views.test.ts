import { loadSharedMemory } from '@ddp/shm';
import { tf, wasmHeapBuffer } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { checkHeapUnmoved, sharedGradientView, shareFiniteOffThread } from './heap-views.js';

describe.skipIf(!loadSharedMemory() || tf.getBackend() !== 'wasm')(
  'gradients seen in the wasm heap as shared memory',
  () => {
    it("a view of a tensor's own storage stays right after the heap grew (V8 grows it in place)", () => {
      const grad = tf.tensor1d([1, 2, 3, 4]);
      const view = sharedGradientView(grad)!;
      expect(view.buffer).toBeInstanceOf(SharedArrayBuffer);
      const heap = wasmHeapBuffer()!;
      const big = tf.zeros([heap.byteLength / 2]); // more than the heap has free: it grows
      expect(wasmHeapBuffer()).not.toBe(heap);
      expect(heap.byteLength).toBe(0); // the old ArrayBuffer is detached …
      view[2] = 30; // … the shared view still writes the tensor's memory
      expect([...(grad.dataSync() as Float32Array)]).toEqual([1, 2, 30, 4]);
      expect(() => checkHeapUnmoved(0, 0)).not.toThrow();
      const after = sharedGradientView(grad)!; // a new alias over the larger heap, same address
      expect(after.byteOffset).toBe(view.byteOffset);
      expect(after.buffer.byteLength).toBeGreaterThan(view.buffer.byteLength);
      tf.dispose([grad, big]);
    });

    it('no view of storage another tensor shares, of other dtypes, or of a disposed tensor', () => {
      const grad = tf.tensor2d([
        [1, 2],
        [3, 4],
      ]);
      const flat = tf.reshape(grad, [4]);
      expect(sharedGradientView(grad)).toBeNull();
      flat.dispose();
      expect(sharedGradientView(grad)).not.toBeNull();
      const ints = tf.tensor1d([1, 2], 'int32');
      expect(sharedGradientView(ints)).toBeNull();
      tf.dispose([grad, ints]);
      expect(sharedGradientView(grad)).toBeNull();
    });
  },
);

describe.skipIf(!loadSharedMemory())("the finite check of a rank's share, split into jobs on the thread pool", () => {
  it('finds a NaN or Infinity exactly when it lies in the share, at every share and job edge', async () => {
    const job = 1 << 19;
    const views = [new Float32Array(new SharedArrayBuffer(4 * (3 * job + 5))), new Float32Array(7)];
    const [large] = views;
    const edges = [0, job - 1, job, 2 * job - 1, 2 * job, 3 * job - 1, 3 * job, 3 * job + 4];
    for (const size of [1, 2, 3])
      for (let rank = 0; rank < size; rank++) {
        const lo = Math.floor((large.length * rank) / size);
        const hi = Math.floor((large.length * (rank + 1)) / size);
        const jobEdges = [0, 1, 2].flatMap((j) => [lo + j * job - 1, lo + j * job, lo + (j + 1) * job - 1]);
        for (const at of new Set([...edges, lo - 1, lo, hi - 1, hi, ...jobEdges].filter((i) => i >= 0))) {
          if (at >= large.length) continue;
          large[at] = at % 2 ? Number.NaN : Number.NEGATIVE_INFINITY;
          expect([size, rank, at, await shareFiniteOffThread(views, rank, size)]).toEqual([
            size,
            rank,
            at,
            !(at >= lo && at < hi),
          ]);
          large[at] = 0;
        }
      }
    views[1][6] = Number.POSITIVE_INFINITY; // the last element of a small array: only the last rank's share
    expect(await Promise.all([0, 1, 2].map((rank) => shareFiniteOffThread(views, rank, 3)))).toEqual([
      true,
      true,
      false,
    ]);
  });
});

import { loadSharedMemory } from '@ddp/shm';
import { tf, wasmHeapBuffer } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { checkHeapUnmoved, sharedGradientView } from './heap-views.js';

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

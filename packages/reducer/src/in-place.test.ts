import { tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { mse } from '@ddp/nn';
import { loadSharedMemory } from '@ddp/shm';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IN_PLACE_MIN_ELEMENTS } from './bucket.js';
import { type InPlaceBucket, inPlaceHook } from './comm-hooks.js';
import { DistributedDataParallel } from './ddp.js';
import { mlp, normal, rows } from './test/models.js';

/**
 * One backward of an MLP whose first weight is large enough to be reduced in place; `hook` sees that weight's bucket.
 */
async function backwardWith(
  hook: (bucket: InPlaceBucket, large: tf.Tensor) => Promise<void>,
  checkFinite: boolean,
): Promise<void> {
  const model = mlp(21, [5, 13_200, 3]);
  const ddp = await DistributedDataParallel.create(model, { checkFinite, firstBucketMB: 0.1, bucketCapMB: 0.1 });
  const large = model.parameters().find((p) => p.size >= IN_PLACE_MIN_ELEMENTS)!;
  ddp.registerCommHook(
    null,
    inPlaceHook(async (_s, bucket) => {
      if (bucket.parameters.some((p) => p.param === large)) await hook(bucket, large.grad!);
    }),
  );
  const x = normal([4, 5], 22);
  const y = normal([4, 3], 23);
  const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
  try {
    await loss.backward();
  } finally {
    loss.dispose();
    tf.dispose([x, y]);
    model.dispose();
  }
}

/** The array of `bucket` that is `grad`'s own storage, or undefined. */
const ownArray = (bucket: InPlaceBucket, grad: tf.Tensor) =>
  bucket.arrays.find(
    (a) => a.length === grad.size && a.buffer instanceof SharedArrayBuffer && a.byteLength < a.buffer.byteLength,
  );

describe.skipIf(!loadSharedMemory() || tf.getBackend() !== 'wasm')(
  'gradients reduced in place, in a world of one',
  () => {
    beforeAll(async () => {
      await initProcessGroup({ rank: 0, worldSize: 1 });
    });
    afterAll(async () => {
      await destroyProcessGroup();
    });

    it('a gradient disposed while its all-reduce runs keeps its memory until it ends: no other tensor is written', async () => {
      let other: tf.Tensor | null = null;
      let sawOwn = false;
      await backwardWith(async (bucket, grad) => {
        const own = ownArray(bucket, grad);
        sawOwn = own !== undefined;
        grad.dispose(); // as a user's dispose would, mid-reduction
        other = tf.keep(tf.fill([grad.size], 1)); // would reuse the freed block
        await new Promise((r) => setTimeout(r, 5));
        own?.fill(7); // the comm thread's late write
      }, false);
      expect(sawOwn).toBe(true);
      expect((other!.dataSync() as Float32Array).every((v) => v === 1)).toBe(true);
      other!.dispose();
    });

    it('checkFinite finds a NaN left in a gradient reduced in place, naming it', async () => {
      const run = backwardWith(async (bucket, grad) => {
        ownArray(bucket, grad)![IN_PLACE_MIN_ELEMENTS - 3] = Number.NaN;
      }, true);
      await expect(run).rejects.toMatchObject({ name: 'NonFiniteGradientError', parameter: '0.weight' });
    });
  },
);

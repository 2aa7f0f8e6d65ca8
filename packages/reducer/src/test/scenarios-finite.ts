// Test-only: the finite check shared between ranks (rank.child.ts).

import { tidy } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { mse, SGD } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { IN_PLACE_MIN_ELEMENTS } from '../bucket.js';
import { allreduceHook, DistributedDataParallel, type InPlaceBucket, inPlaceHook } from '../index.js';
import { mlp, normal, rows } from './models.js';

type Scenario = (pg: ProcessGroup) => Promise<Record<string, unknown>>;

/** One value to put into one rank's gradients just before a bucket's all-reduce. */
interface Injection {
  bucket: number;
  array: number;
  at: number;
  value: number;
  rank: number;
}

/** The parameter whose gradient holds element `at` of the bucket's `array` (the layout InPlaceBucket documents). */
function parameterAt({ arrays, parameters }: InPlaceBucket, array: number, at: number): string {
  const large = parameters.filter((s) => s.size >= IN_PLACE_MIN_ELEMENTS);
  const small = arrays.length - large.length; // 1: the small gradients' stretch comes first
  if (array >= small) return large[array - small].name;
  return parameters.find((s) => s.size < IN_PLACE_MIN_ELEMENTS && s.offset <= at && at < s.offset + s.size)!.name;
}

/**
 * Each rank checks only its share of the averages: one NaN or ±Infinity put into one rank's
 * gradient at each edge of every rank's share of every array of every bucket must still
 * raise NonFiniteGradientError naming that parameter on every rank; then a clean step passes.
 */
async function nonFiniteShares(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const model = mlp(35, [5, 16, 3]);
  const ddp = await DistributedDataParallel.create(model, { firstBucketMB: 1e-4, bucketCapMB: 1e-4 });
  const state: { inject: Injection | null; layout: Map<number, number[]>; names: Map<string, string> } = {
    inject: null,
    layout: new Map(),
    names: new Map(),
  };
  ddp.registerCommHook(
    state,
    inPlaceHook((s: typeof state, bucket: InPlaceBucket) => {
      s.layout.set(
        bucket.index,
        bucket.arrays.map((a) => a.length),
      );
      const i = s.inject;
      if (i !== null && i.bucket === bucket.index) {
        s.names.set(`${i.bucket}/${i.array}/${i.at}`, parameterAt(bucket, i.array, i.at));
        if (i.rank === pg.rank) bucket.arrays[i.array][i.at] = i.value;
      }
      return allreduceHook(null, bucket);
    }),
  );
  const opt = new SGD(model.parameters(), { lr: 0 });
  const x = normal([4, 5], 90 + pg.rank);
  const y = normal([4, 3], 95 + pg.rank);
  const step = async (): Promise<string> => {
    const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
    try {
      await loss.backward();
      return 'ok';
    } catch (e) {
      return `${(e as Error).name}:${(e as { parameter?: string }).parameter}`;
    } finally {
      loss.dispose();
      opt.zeroGrad();
    }
  };
  const clean = [await step(), await step()]; // the second with the buckets rebuilt in ready order
  const values = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY];
  const trials: { want: string; got: string }[] = [];
  for (const [bucket, lengths] of [...state.layout].sort(([a], [b]) => a - b))
    for (const [array, n] of lengths.entries())
      for (let r = 0; r < pg.size; r++) {
        const lo = Math.floor((n * r) / pg.size);
        const hi = Math.floor((n * (r + 1)) / pg.size);
        for (const at of new Set([lo, hi - 1].filter((p) => p >= lo && p < hi))) {
          const value = values[trials.length % values.length];
          state.inject = { bucket, array, at, value, rank: (r + 1) % pg.size };
          const got = await step();
          trials.push({ want: `NonFiniteGradientError:${state.names.get(`${bucket}/${array}/${at}`)}`, got });
        }
      }
  state.inject = null;
  clean.push(await step());
  tf.dispose([x, y]);
  model.dispose();
  return { clean, trials };
}

export const finiteScenarios: Record<string, Scenario> = { nonFiniteShares };

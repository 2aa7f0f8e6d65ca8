import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import type { Bucket, WriteBackOptions } from './bucket.js';
import type { Collective } from './bucket-plan.js';
import { NonFiniteGradientError } from './errors.js';

/**
 * Makes every bucket's averages the gradients (Bucket.writeBack); with checkFinite, raises
 * NonFiniteGradientError on every rank, before any steps, when some rank found a NaN or
 * Infinity in them. Each rank checked its share of the averages reduced in place — the same
 * on every rank, so the shares cover them all — and the copied ones whole; one flag (MAX
 * over `group`) tells every rank. Then each names the first such gradient, checked whole.
 * `group` null: no flag to exchange (a hook that copies, so every rank checked everything).
 */
export async function writeBackAgreed(
  buckets: readonly Bucket[],
  results: readonly (Float32Array | null)[],
  opts: WriteBackOptions,
  group: ProcessGroup | null,
  collective: Collective,
): Promise<void> {
  const finite = buckets.map((bucket) => bucket.writeBack(results[bucket.index], opts)).every(Boolean);
  if (!opts.checkFinite) return;
  let anywhere = !finite;
  if (group !== null && group.size > 1) {
    const flag = Int32Array.of(finite ? 0 : 1);
    await collective('finite-check all-reduce', () => group.allReduce(flag, { op: ReduceOp.MAX }).wait());
    anywhere = flag[0] > 0;
  }
  if (!anywhere) return;
  for (const bucket of buckets) {
    const error = bucket.nonFinite(results[bucket.index], opts);
    if (error) throw error;
  }
  // only a hook whose averages differ between ranks gets here (its contract says they do not)
  const where = '(found by another rank; the comm hook gave ranks different averages)';
  throw new NonFiniteGradientError(where, Number.NaN, opts.iteration);
}

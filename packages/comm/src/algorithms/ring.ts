import type { NumArray, ReduceOp } from '../dtypes.js';
import { finishAverage } from '../reduce.js';
import type { OpContext } from '../worker/op-context.js';
import { chunkBounds, mod, segments } from './partition.js';
import { bytesOf } from './views.js';

/**
 * Bandwidth-optimal ring algorithms, segmented and pipelined: every segment is forwarded
 * to the right neighbour as soon as it has been reduced (or copied), so all links carry
 * data at once. All-reduce = reduce-scatter + all-gather; each rank sends 2(N−1)/N of the data.
 */

/** Ring neighbours and the segments of chunk c (bounds in items, segments of `seg` items). */
export function ring(ctx: OpContext, bounds: number[], seg: number) {
  const n = ctx.size;
  const r = ctx.rank;
  return { n, r, right: mod(r + 1, n), left: mod(r - 1, n), chunkSegs: (c: number) => segments(bounds[c] as number, bounds[c + 1] as number, seg) };
}

/** After this, rank r holds chunk r (bounds in elements) reduced over all ranks. */
export async function ringReduceScatter(ctx: OpContext, data: NumArray, bounds: number[], op: ReduceOp, segElems: number): Promise<void> {
  const { n, r, right, left, chunkSegs } = ring(ctx, bounds, segElems);
  if (n === 1) return;
  for (const [s, e] of chunkSegs(mod(r - 1, n))) ctx.send(right, bytesOf(data.subarray(s, e)));
  // every receive of the phase is posted at once (they complete in order): each segment is
  // reduced straight from the socket's read buffer, then forwarded
  const steps: Step<NumArray>[] = [];
  for (let k = 0; k < n - 1; k++) {
    for (const [s, e] of chunkSegs(mod(r - 2 - k, n))) {
      const dst = data.subarray(s, e);
      steps.push({ dst, forward: k < n - 2, done: quiet(ctx.recvReduce(left, dst, op)) });
    }
  }
  for (const st of steps) {
    await st.done;
    if (st.forward) ctx.send(right, bytesOf(st.dst));
  }
}

/** Rank r starts with chunk r of `bytes` (bounds in bytes); afterwards every rank has all. */
export async function ringAllGather(ctx: OpContext, bytes: Uint8Array, bounds: number[], segBytes: number): Promise<void> {
  const { n, r, right, left, chunkSegs } = ring(ctx, bounds, segBytes);
  if (n === 1) return;
  for (const [s, e] of chunkSegs(r)) ctx.send(right, bytes.subarray(s, e));
  const steps: Step<Uint8Array>[] = [];
  for (let k = 0; k < n - 1; k++) {
    for (const [s, e] of chunkSegs(mod(r - 1 - k, n))) {
      const dst = bytes.subarray(s, e);
      steps.push({ dst, forward: k < n - 2, done: quiet(ctx.recvInto(left, dst)) });
    }
  }
  for (const st of steps) {
    await st.done;
    if (st.forward) ctx.send(right, st.dst);
  }
}

/** Ring all-reduce in place; AVG comes out averaged. */
export async function ringAllReduce(ctx: OpContext, data: NumArray, op: ReduceOp, segBytes: number): Promise<void> {
  const bpe = data.BYTES_PER_ELEMENT;
  const bounds = chunkBounds(data.length, ctx.size);
  await ringReduceScatter(ctx, data, bounds, op, Math.max(1, Math.floor(segBytes / bpe)));
  // each rank divides only the chunk it owns, before gathering: 1/N of the division pass
  if (op === 'avg') finishAverage(data.subarray(bounds[ctx.rank], bounds[ctx.rank + 1]), ctx.size);
  // segments sent above point into `data`: let them leave before all-gather overwrites it
  await ctx.flush();
  await ringAllGather(
    ctx,
    bytesOf(data),
    bounds.map((b) => b * bpe),
    segBytes,
  );
  // the caller may hand `data` back to the user next: the last segments must be out
  await ctx.flush();
}

/** Pipelined chain broadcast root → root+1 → … (bytes), for large messages. */
export async function chainBroadcast(ctx: OpContext, bytes: Uint8Array, root: number, segBytes: number): Promise<void> {
  const n = ctx.size;
  if (n === 1) return;
  const pos = mod(ctx.rank - root, n);
  const next = mod(ctx.rank + 1, n);
  const prev = mod(ctx.rank - 1, n);
  const segs = segments(0, bytes.byteLength, segBytes).map(([s, e]) => bytes.subarray(s, e));
  if (pos === 0) {
    for (const seg of segs) ctx.send(next, seg);
    return;
  }
  const steps = segs.map((dst) => ({ dst, forward: pos < n - 1, done: quiet(ctx.recvInto(prev, dst)) }));
  for (const st of steps) {
    await st.done;
    if (st.forward) ctx.send(next, st.dst);
  }
}

export interface Step<T> {
  dst: T;
  forward: boolean;
  done: Promise<unknown>;
}

/** Marks a posted receive as handled: it is awaited later, in order, and may fail first. */
export function quiet<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {});
  return p;
}

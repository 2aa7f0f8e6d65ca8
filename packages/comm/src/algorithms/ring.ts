import type { NumArray, ReduceOp } from '../dtypes.js';
import type { OpContext } from '../execution/op-context.js';
import type { FrameHeader } from '../transport/frame.js';
import { exchange } from './direct.js';
import { boundsFromSizes, chunkBounds, mod, segments } from './partition.js';
import { finishAverage, reduceInto } from './reduce.js';
import { RingAverage } from './ring-average.js';
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
  return {
    n,
    r,
    right: mod(r + 1, n),
    left: mod(r - 1, n),
    chunkSegs: (c: number) => segments(bounds[c], bounds[c + 1], seg),
  };
}

/**
 * After this, rank r holds chunk r (bounds in elements) reduced over all ranks: in `data`,
 * or, given `partials` (as long as data), in partials, with `data` left as it was.
 */
export async function ringReduceScatter(
  ctx: OpContext,
  data: NumArray,
  bounds: number[],
  op: ReduceOp,
  segElems: number,
  partials?: NumArray,
): Promise<void> {
  const { n, r, right, left, chunkSegs } = ring(ctx, bounds, segElems);
  if (n === 1) {
    partials?.set(data);
    return;
  }
  for (const [s, e] of chunkSegs(mod(r - 1, n))) ctx.send(right, bytesOf(data.subarray(s, e)));
  // every receive of the phase is posted at once (they complete in order): each segment is
  // reduced straight from the socket's read buffer (or lands in partials and has this rank's
  // values added: the same sum, addition commutes), then forwarded
  const steps: (Step<NumArray> & { own?: NumArray })[] = [];
  for (let k = 0; k < n - 1; k++) {
    for (const [s, e] of chunkSegs(mod(r - 2 - k, n))) {
      const own = data.subarray(s, e);
      const dst = partials ? partials.subarray(s, e) : own;
      const done = quiet(partials ? ctx.recvInto(left, bytesOf(dst)) : ctx.recvReduce(left, dst, op));
      steps.push({ dst, own: partials && own, forward: k < n - 2, done });
    }
  }
  for (const st of steps) {
    await st.done;
    if (st.own) reduceInto(st.dst, st.own, op);
    if (st.forward) ctx.send(right, bytesOf(st.dst));
  }
}

/**
 * Rank r starts with chunk r of `bytes` (bounds in bytes); afterwards every rank has all.
 * `flags.aux` travels with rank r's chunk (forwarded as received); `flags.onHeader` sees each
 * segment's header before the segment lands.
 */
export async function ringAllGather(
  ctx: OpContext,
  bytes: Uint8Array,
  bounds: number[],
  segBytes: number,
  flags?: { aux: number; onHeader: (h: FrameHeader, dst: Uint8Array) => void },
): Promise<void> {
  const { n, r, right, left, chunkSegs } = ring(ctx, bounds, segBytes);
  if (n === 1) return;
  for (const [s, e] of chunkSegs(r)) ctx.send(right, bytes.subarray(s, e), flags?.aux);
  const steps: Step<Uint8Array>[] = [];
  for (let k = 0; k < n - 1; k++) {
    for (const [s, e] of chunkSegs(mod(r - 1 - k, n))) {
      const dst = bytes.subarray(s, e);
      const onHeader = flags && ((h: FrameHeader) => flags.onHeader(h, dst));
      steps.push({ dst, forward: k < n - 2, done: quiet(ctx.recvInto(left, dst, onHeader)) });
    }
  }
  for (const st of steps) {
    const f = await st.done;
    if (st.forward) ctx.send(right, st.dst, (f as { header: FrameHeader }).header.aux);
  }
}

/** Ring all-reduce in place; AVG comes out averaged (floating-point AVG without overflow: RingAverage). */
export async function ringAllReduce(ctx: OpContext, data: NumArray, op: ReduceOp, segBytes: number): Promise<void> {
  const bpe = data.BYTES_PER_ELEMENT;
  const bounds = chunkBounds(data.length, ctx.size);
  const [lo, hi] = [bounds[ctx.rank], bounds[ctx.rank + 1]];
  const average = op === 'avg' && !(data instanceof Int32Array) ? new RingAverage(bpe, (i) => data[i]) : null;
  const partials = average ? ctx.group.scratch(data) : undefined;
  await ringReduceScatter(ctx, data, bounds, op, Math.max(1, Math.floor(segBytes / bpe)), partials);
  // each rank divides only the chunk it owns, before gathering: 1/N of the division pass
  if (average && partials) {
    for (let i = lo; i < hi; i++) {
      const v = partials[i] / ctx.size;
      if (v === Number.POSITIVE_INFINITY || v === Number.NEGATIVE_INFINITY) average.note(i);
      data[i] = v;
    }
  } else if (op === 'avg') finishAverage(data.subarray(lo, hi), ctx.size);
  // segments sent above point into `data`: let them leave before all-gather overwrites it
  await ctx.flush();
  const all = bytesOf(data);
  await ringAllGather(
    ctx,
    all,
    bounds.map((b) => b * bpe),
    segBytes,
    average?.allGatherHooks(all),
  );
  const infinite = (i: number) => data[i] === Number.POSITIVE_INFINITY || data[i] === Number.NEGATIVE_INFINITY;
  const Same = data.constructor as new (n: number) => NumArray;
  await average?.finish(
    ctx,
    infinite,
    Same,
    (v) => ringAllReduce(ctx, v, 'sum', segBytes),
    (i, v) => {
      data[i] = v;
    },
  );
  // the caller may hand `data` back to the user next: the last segments must be out
  await ctx.flush();
}

/**
 * reduceScatter with floating-point AVG on the ring, by RingAverage's rule. No all-gather
 * follows to carry an owner's overflow flag, so the ranks swap one byte each; when some
 * owner's average overflowed, every rank sums x / N over the flagged chunks (its input is
 * still in place) and each owner takes the elements that overflowed.
 */
export async function ringReduceScatterAverage(
  ctx: OpContext,
  data: NumArray,
  bounds: number[],
  segBytes: number,
): Promise<void> {
  const n = ctx.size;
  const r = ctx.rank;
  const partials = ctx.group.scratch(data);
  const segElems = Math.max(1, Math.floor(segBytes / data.BYTES_PER_ELEMENT));
  await ringReduceScatter(ctx, data, bounds, 'sum', segElems, partials);
  const overflowed = new Map<number, number>();
  for (let i = bounds[r]; i < bounds[r + 1]; i++) {
    const v = partials[i] / n;
    if (v === Number.POSITIVE_INFINITY || v === Number.NEGATIVE_INFINITY) overflowed.set(i, data[i]);
    data[i] = v;
  }
  const flags = new Uint8Array(n);
  flags[r] = overflowed.size > 0 ? 1 : 0;
  await exchange(ctx, flags.subarray(r, r + 1), (p) => flags.subarray(p, p + 1));
  const chunks = [...flags.keys()].filter((c) => flags[c] === 1);
  if (chunks.length === 0) return;
  const starts = boundsFromSizes(chunks.map((c) => bounds[c + 1] - bounds[c]));
  const divided = new (data.constructor as new (k: number) => NumArray)(starts[chunks.length]);
  chunks.forEach((c, k) => {
    for (let i = bounds[c]; i < bounds[c + 1]; i++) {
      const x = c === r ? (overflowed.get(i) ?? 0) : data[i];
      divided[starts[k] + i - bounds[c]] = x / n;
    }
  });
  await ringAllReduce(ctx, divided, 'sum', segBytes);
  const mine = chunks.indexOf(r);
  for (const i of overflowed.keys()) data[i] = divided[starts[mine] + i - bounds[r]];
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

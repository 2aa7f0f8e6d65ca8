import type { NumArray, ReduceOp } from '../dtypes.js';
import { reduceInto } from '../reduce.js';
import type { OpContext } from '../worker/op-context.js';
import { chunkBounds, mod, segments } from './partition.js';
import { bytesOf, numView } from './views.js';

/**
 * Bandwidth-optimal ring algorithms, segmented and pipelined: every segment is forwarded
 * to the right neighbour as soon as it has been reduced (or copied), so all links carry
 * data at once. All-reduce = reduce-scatter + all-gather; each rank sends 2(N−1)/N of the data.
 */

/** After this, rank r holds chunk r (bounds in elements) reduced over all ranks. */
export async function ringReduceScatter(ctx: OpContext, data: NumArray, bounds: number[], op: ReduceOp, segElems: number): Promise<void> {
  const n = ctx.size;
  const r = ctx.rank;
  if (n === 1) return;
  const right = mod(r + 1, n);
  const left = mod(r - 1, n);
  const chunkSegs = (c: number) => segments(bounds[c] as number, bounds[c + 1] as number, segElems);
  for (const [s, e] of chunkSegs(mod(r - 1, n))) ctx.send(right, bytesOf(data.subarray(s, e)));
  for (let k = 0; k < n - 1; k++) {
    for (const [s, e] of chunkSegs(mod(r - 2 - k, n))) {
      const f = await ctx.recv(left);
      const dst = data.subarray(s, e);
      if (f.payload.byteLength !== dst.byteLength) ctx.lengthMismatch(left, dst.byteLength, f.payload.byteLength);
      reduceInto(dst, numView(data, f.payload), op);
      if (k < n - 2) ctx.send(right, bytesOf(dst));
    }
  }
}

/** Rank r starts with chunk r of `bytes` (bounds in bytes); afterwards every rank has all. */
export async function ringAllGather(ctx: OpContext, bytes: Uint8Array, bounds: number[], segBytes: number): Promise<void> {
  const n = ctx.size;
  const r = ctx.rank;
  if (n === 1) return;
  const right = mod(r + 1, n);
  const left = mod(r - 1, n);
  const chunkSegs = (c: number) => segments(bounds[c] as number, bounds[c + 1] as number, segBytes);
  for (const [s, e] of chunkSegs(r)) ctx.send(right, bytes.subarray(s, e));
  for (let k = 0; k < n - 1; k++) {
    for (const [s, e] of chunkSegs(mod(r - 1 - k, n))) {
      const f = await ctx.recv(left);
      if (f.payload.byteLength !== e - s) ctx.lengthMismatch(left, e - s, f.payload.byteLength);
      bytes.set(f.payload, s);
      if (k < n - 2) ctx.send(right, bytes.subarray(s, e));
    }
  }
}

/** Ring all-reduce in place. */
export async function ringAllReduce(ctx: OpContext, data: NumArray, op: ReduceOp, segBytes: number): Promise<void> {
  const bpe = data.BYTES_PER_ELEMENT;
  const bounds = chunkBounds(data.length, ctx.size);
  await ringReduceScatter(ctx, data, bounds, op, Math.max(1, Math.floor(segBytes / bpe)));
  // segments sent above point into `data`: let them leave before all-gather overwrites it
  await ctx.flush();
  await ringAllGather(
    ctx,
    bytesOf(data),
    bounds.map((b) => b * bpe),
    segBytes,
  );
}

/** Pipelined chain broadcast root → root+1 → … (bytes), for large messages. */
export async function chainBroadcast(ctx: OpContext, bytes: Uint8Array, root: number, segBytes: number): Promise<void> {
  const n = ctx.size;
  if (n === 1) return;
  const pos = mod(ctx.rank - root, n);
  const next = mod(ctx.rank + 1, n);
  const prev = mod(ctx.rank - 1, n);
  for (const [s, e] of segments(0, bytes.byteLength, segBytes)) {
    if (pos > 0) {
      const f = await ctx.recv(prev);
      if (f.payload.byteLength !== e - s) ctx.lengthMismatch(prev, e - s, f.payload.byteLength);
      bytes.set(f.payload, s);
    }
    if (pos < n - 1) ctx.send(next, bytes.subarray(s, e));
  }
}

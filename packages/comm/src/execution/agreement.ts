import { bytesOf } from '../algorithms/views.js';
import type { OpContext } from './op-context.js';

/**
 * Agreement on a collective in which some rank would not otherwise hear from every peer (a
 * broadcast or scatter root only sends; reduce and gather senders only send) or in which
 * per-rank sizes must fit together (scatter, allToAll). Every rank sends every other a frame
 * carrying its fingerprint and a small descriptor, before any data of the op, and the op
 * completes only once every peer's has arrived and all fit. Every rank checks the same N
 * descriptors, so all reach the same verdict: a mismatch raises on every rank, roots included.
 * It costs one frame per pair, sent alongside the data (no extra round before the data moves).
 *
 * Call it before the op sends or posts anything else (frames from a peer arrive in order).
 * `own` must have the same length on every rank of a matching call; `misfit` sees every
 * rank's, in group-rank order, and says what does not fit (group ranks named), or null.
 */
/** What does not fit across the ranks' descriptors (group ranks named), or null. */
export type Misfit = (all: Float64Array[]) => { why: string; ranks: number[] } | null;

export async function agree(ctx: OpContext, own: Float64Array, misfit: Misfit = () => null): Promise<void> {
  if (ctx.size === 1) return;
  const mine = bytesOf(own);
  for (let p = 0; p < ctx.size; p++) if (p !== ctx.rank) ctx.send(p, mine.byteLength > 0 ? mine : null);
  const all: Float64Array[] = [];
  all[ctx.rank] = own;
  await Promise.all(
    Array.from({ length: ctx.size }, async (_, p) => {
      if (p === ctx.rank) return;
      const f = await ctx.recv(p);
      if (f.payload.byteLength !== mine.byteLength) ctx.lengthMismatch(p, mine.byteLength, f.payload.byteLength);
      // a copy of its own bytes: a Buffer's slice() is a view, whose .buffer may be a pool's (right here only
      // because the reader allocates each payload alone)
      all[p] = new Float64Array(new Uint8Array(f.payload).buffer);
    }),
  );
  const bad = misfit(all);
  if (bad) ctx.disagree(bad.why, bad.ranks);
}

/** Scatter's descriptor: [this rank's output length, then (on the root) the length it sends each rank]. */
export function scatterDescriptor(size: number, outLength: number, sizes: number[] | undefined): Float64Array {
  const d = new Float64Array(size + 1);
  d[0] = outLength;
  if (sizes) d.set(sizes, 1);
  return d;
}

export function scatterMisfit(root: number): Misfit {
  return (all) => {
    const sends = all[root] as Float64Array;
    for (let k = 0; k < all.length; k++) {
      const expects = (all[k] as Float64Array)[0];
      if (sends[k + 1] !== expects) {
        return {
          why:
            `the root (group rank ${root}) sends ${sends[k + 1]} elements to group rank ${k}, whose ` +
            `output holds ${expects}`,
          ranks: [root, k],
        };
      }
    }
    return null;
  };
}

/** allToAll's descriptor: [what this rank sends each rank (N), what it expects from each (N)]. */
export function allToAllDescriptor(sizes: number[], outSizes: number[]): Float64Array {
  return Float64Array.from([...sizes, ...outSizes]);
}

export const allToAllMisfit: Misfit = (all) => {
  const n = all.length;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const sends = (all[i] as Float64Array)[j];
      const expects = (all[j] as Float64Array)[n + i];
      if (sends !== expects)
        return {
          why: `group rank ${i} sends ${sends} elements to group rank ${j}, which expects ${expects}`,
          ranks: [i, j],
        };
    }
  }
  return null;
};

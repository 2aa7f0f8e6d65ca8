import type { NumArray, ReduceOp } from '../dtypes.js';
import type { OpContext } from '../execution/op-context.js';
import { finishAverage, reduceInto } from './reduce.js';
import { bytesOf } from './views.js';

/**
 * Latency-optimal algorithms for small messages: one round in which every rank talks to
 * every other directly (N−1 messages each, all in flight at once). Reductions run in rank
 * order 0, 1, …, N−1 on every rank, so every rank gets bit-identical results.
 */

/** Every rank sends `bytes` to every other and receives each peer's message into inbox(peer). */
export async function exchange(ctx: OpContext, bytes: Uint8Array, inbox: (peer: number) => Uint8Array): Promise<void> {
  for (let p = 0; p < ctx.size; p++) if (p !== ctx.rank) ctx.sendMessage(p, bytes);
  await Promise.all(
    Array.from({ length: ctx.size }, (_, p) => (p === ctx.rank ? undefined : ctx.recvMessageInto(p, inbox(p)))),
  );
}

/** All-reduce in place; AVG comes out averaged. */
export async function directAllReduce(ctx: OpContext, data: NumArray, op: ReduceOp): Promise<void> {
  if (ctx.size === 1) return;
  const inputs: NumArray[] = [];
  const Ctor = data.constructor as new (n: number) => NumArray;
  await exchange(ctx, bytesOf(data), (p) => {
    const buf = new Ctor(data.length);
    inputs[p] = buf;
    return bytesOf(buf);
  });
  inputs[ctx.rank] = data;
  const acc = reduceInRankOrder(inputs, op);
  // our frames still point into `data` until the kernel has them
  await ctx.flush();
  data.set(acc);
}

/** Root sends to all, everyone else receives: a single round. */
export async function directBroadcast(ctx: OpContext, bytes: Uint8Array, root: number): Promise<void> {
  if (ctx.rank === root) {
    for (let p = 0; p < ctx.size; p++) if (p !== root) ctx.sendMessage(p, bytes);
  } else {
    await ctx.recvMessageInto(root, bytes);
  }
}

/** Every rank's input reduced in rank order into a new array; AVG averaged (see finishAverage). */
export function reduceInRankOrder(inputs: NumArray[], op: ReduceOp): NumArray {
  const acc = (inputs[0] as NumArray).slice();
  for (let p = 1; p < inputs.length; p++) reduceInto(acc, inputs[p] as NumArray, op);
  if (op === 'avg') finishAverage(acc, inputs.length, (r, i) => (inputs[r] as NumArray)[i]);
  return acc;
}

/** Everyone sends to root, which reduces in rank order; AVG comes out averaged on the root. */
export async function directReduce(ctx: OpContext, data: NumArray, root: number, op: ReduceOp): Promise<void> {
  if (ctx.rank !== root) {
    ctx.sendMessage(root, bytesOf(data));
    return;
  }
  const Ctor = data.constructor as new (n: number) => NumArray;
  const inputs: NumArray[] = [];
  await Promise.all(
    Array.from({ length: ctx.size }, async (_, p) => {
      if (p === root) return;
      const buf = new Ctor(data.length);
      inputs[p] = buf;
      await ctx.recvMessageInto(p, bytesOf(buf));
    }),
  );
  inputs[root] = data;
  data.set(reduceInRankOrder(inputs, op));
}

/** Receives a message of unknown length: the first frame's aux field says its byte length. */
export async function recvSized(ctx: OpContext, from: number): Promise<Uint8Array> {
  const first = await ctx.recv(from);
  const total = first.header.aux;
  if (total === first.payload.byteLength) return first.payload;
  const parts = [first.payload];
  let got = first.payload.byteLength;
  while (got < total) {
    const f = await ctx.recv(from);
    if (f.payload.byteLength === 0 || got + f.payload.byteLength > total)
      ctx.lengthMismatch(from, total, got + f.payload.byteLength);
    parts.push(f.payload);
    got += f.payload.byteLength;
  }
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.byteLength;
  }
  return out;
}

/** Sends a message whose length the receiver learns from the aux field (recvSized). */
export function sendSized(ctx: OpContext, to: number, bytes: Uint8Array, maxFrame: number): void {
  if (bytes.byteLength === 0) {
    ctx.send(to, null, 0);
    return;
  }
  for (let off = 0; off < bytes.byteLength; off += maxFrame) {
    ctx.send(to, bytes.subarray(off, Math.min(bytes.byteLength, off + maxFrame)), bytes.byteLength);
  }
}

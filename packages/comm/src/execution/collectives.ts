import {
  directBroadcast,
  directReduce,
  exchange,
  recvSized,
  reduceInRankOrder,
  sendSized,
} from '../algorithms/direct.js';
import { narrowHalf, widenHalf } from '../algorithms/half-codec.js';
import { type HostParts, hierarchicalAllGather, hierarchicalReduceScatter } from '../algorithms/hierarchical-gather.js';
import { boundsFromSizes, chunkBounds } from '../algorithms/partition.js';
import { finishAverage } from '../algorithms/reduce.js';
import {
  chainBroadcast,
  quiet,
  ringAllGather,
  ringAllReduce,
  ringReduceScatter,
  ringReduceScatterAverage,
} from '../algorithms/ring.js';
import { shmAllGather, shmReduceScatter } from '../algorithms/shm-gather.js';
import { bytesOf } from '../algorithms/views.js';
import { bytesPerElement, type CommArray, type HalfDtype, type NumArray, type ReduceOp, viewAs } from '../dtypes.js';
import type { OpResult, OpSpec } from '../scheduling/protocol.js';
import { MAX_FRAME_PAYLOAD } from '../transport/frame.js';
import { agree, allToAllDescriptor, allToAllMisfit, scatterDescriptor, scatterMisfit } from './agreement.js';
import type { OpContext } from './op-context.js';
import { small, tuning } from './tuning.js';

export const isHalf = (d: string): d is HalfDtype => d === 'float16' || d === 'bfloat16';

/** The op's staging array as numbers to reduce (half words widened to float32). */
export function numeric(
  req: OpSpec,
  offset = 0,
  length = req.length,
): { raw: CommArray; work: NumArray; done: () => void } {
  const bpe = bytesPerElement(req.dtype);
  const raw = viewAs(req.dtype, req.sab as SharedArrayBuffer, req.sabOffset + offset * bpe, length);
  if (!isHalf(req.dtype)) return { raw, work: raw as NumArray, done: () => {} };
  const work = widenHalf(raw as Uint16Array, req.dtype);
  return { raw, work, done: () => narrowHalf(work, req.dtype as HalfDtype, raw as Uint16Array) };
}

/** Rooted collectives: the fingerprint alone must agree (agreement.ts), alongside the data. */
const NO_SIZES = new Float64Array(0);

async function reduce(ctx: OpContext, req: OpSpec): Promise<void> {
  const agreed = quiet(agree(ctx, NO_SIZES));
  const { work, done } = numeric(req);
  if (small(ctx, work.byteLength)) {
    await directReduce(ctx, work, req.root, req.reduceOp);
  } else {
    await ringAllReduce(ctx, work, req.reduceOp, tuning.segmentBytes);
  }
  await agreed;
  if (ctx.rank === req.root) done();
}

/** Reduce-scatter among ranks of one level: rank r gets chunk r (bounds in elements) of `work` reduced, in place. */
async function flatReduceScatter(ctx: OpContext, work: NumArray, bounds: number[], op: ReduceOp): Promise<void> {
  // all on this host (the group, or its host's part): through shared memory (shm-gather.ts)
  if (ctx.group.shm && !ctx.group.hosts) return shmReduceScatter(ctx, ctx.group.shm, work, bounds, op);
  const chunk = (a: NumArray, p: number) => a.subarray(bounds[p], bounds[p + 1]);
  const mine = chunk(work, ctx.rank);
  if (small(ctx, work.byteLength)) {
    // one round: send chunk p to rank p, reduce the chunks received for us in rank order
    const Ctor = work.constructor as new (k: number) => NumArray;
    const parts: NumArray[] = [];
    for (let p = 0; p < ctx.size; p++) if (p !== ctx.rank) ctx.sendMessage(p, bytesOf(chunk(work, p)));
    await Promise.all(
      Array.from({ length: ctx.size }, (_, p) => {
        if (p === ctx.rank) return undefined;
        parts[p] = new Ctor(mine.length);
        return ctx.recvMessageInto(p, bytesOf(parts[p] as NumArray));
      }),
    );
    parts[ctx.rank] = mine;
    mine.set(reduceInRankOrder(parts, op));
  } else if (op === 'avg' && !(work instanceof Int32Array)) {
    await ringReduceScatterAverage(ctx, work, bounds, tuning.segmentBytes);
  } else {
    const segElems = Math.max(1, Math.floor(tuning.segmentBytes / work.BYTES_PER_ELEMENT));
    await ringReduceScatter(ctx, work, bounds, op, segElems);
    if (op === 'avg') finishAverage(mine, ctx.size);
  }
}

/** The op among this host's members and among this rank's peers on the other hosts (a group spanning hosts). */
function hostParts(ctx: OpContext): HostParts | null {
  const hosts = ctx.group.hosts;
  return hosts && { local: ctx.among(hosts.local), across: ctx.among(hosts.across), grid: hosts.grid };
}

/**
 * Reduce-scatter: hierarchical across hosts (hierarchical-gather.ts) except AVG, whose
 * overflow fallback lives in the flat paths.
 */
async function reduceScatter(ctx: OpContext, req: OpSpec): Promise<void> {
  const { work, done } = numeric(req);
  const parts = req.reduceOp === 'avg' ? null : hostParts(ctx);
  if (parts) await hierarchicalReduceScatter(parts, work, req.length / ctx.size, req.reduceOp, flatReduceScatter);
  else await flatReduceScatter(ctx, work, chunkBounds(req.length, ctx.size), req.reduceOp);
  done();
}

/** All-gather of per-rank slots (bounds in bytes) already laid out in `bytes`. */
async function gatherSlots(ctx: OpContext, bytes: Uint8Array, bounds: number[]): Promise<void> {
  if (ctx.group.shm && !ctx.group.hosts) return shmAllGather(ctx, ctx.group.shm, bytes, bounds);
  if (small(ctx, bytes.byteLength)) {
    const own = bytes.subarray(bounds[ctx.rank], bounds[ctx.rank + 1]);
    await exchange(ctx, own, (p) => bytes.subarray(bounds[p], bounds[p + 1]));
  } else {
    await ringAllGather(ctx, bytes, bounds, tuning.segmentBytes);
  }
}

async function allGatherInto(ctx: OpContext, req: OpSpec): Promise<void> {
  const bpe = bytesPerElement(req.dtype);
  const bytes = new Uint8Array(req.sab as SharedArrayBuffer, req.sabOffset, req.length * bpe);
  const parts = hostParts(ctx);
  if (parts) await hierarchicalAllGather(parts, bytes, req.count * bpe, gatherSlots);
  else
    await gatherSlots(
      ctx,
      bytes,
      chunkBounds(req.length, ctx.size).map((b) => b * bpe),
    );
}

async function allGather(ctx: OpContext, req: OpSpec): Promise<OpResult> {
  const bpe = bytesPerElement(req.dtype);
  const counts = new Float64Array(ctx.size);
  counts[ctx.rank] = req.length;
  await exchange(ctx, bytesOf(counts.subarray(ctx.rank, ctx.rank + 1)), (p) => bytesOf(counts.subarray(p, p + 1)));
  const sizes = [...counts];
  const bounds = boundsFromSizes(sizes).map((b) => b * bpe);
  const out = new SharedArrayBuffer(bounds[ctx.size]);
  const bytes = new Uint8Array(out);
  bytes.set(new Uint8Array(req.sab as SharedArrayBuffer, 0, req.length * bpe), bounds[ctx.rank]);
  await gatherSlots(ctx, bytes, bounds);
  return { sab: out, sizes };
}

async function broadcast(ctx: OpContext, req: OpSpec): Promise<void> {
  const agreed = quiet(agree(ctx, NO_SIZES));
  const bytes = new Uint8Array(req.sab as SharedArrayBuffer, req.sabOffset, req.length * bytesPerElement(req.dtype));
  if (small(ctx, bytes.byteLength)) await directBroadcast(ctx, bytes, req.root);
  else await chainBroadcast(ctx, bytes, req.root, tuning.segmentBytes);
  await agreed;
}

async function gather(ctx: OpContext, req: OpSpec): Promise<OpResult | undefined> {
  const agreed = quiet(agree(ctx, NO_SIZES));
  const bpe = bytesPerElement(req.dtype);
  const own = new Uint8Array(req.sab as SharedArrayBuffer, 0, req.length * bpe);
  if (ctx.rank !== req.root) {
    sendSized(ctx, req.root, own, MAX_FRAME_PAYLOAD);
    await agreed;
    return undefined;
  }
  const parts = await Promise.all(
    Array.from({ length: ctx.size }, (_, p) => (p === ctx.rank ? own : recvSized(ctx, p))),
  );
  await agreed;
  for (const p of parts)
    if (p.byteLength % bpe !== 0)
      ctx.lengthMismatch(parts.indexOf(p), p.byteLength + bpe - (p.byteLength % bpe), p.byteLength);
  const sizes = parts.map((p) => p.byteLength / bpe);
  const bounds = boundsFromSizes(parts.map((p) => p.byteLength));
  const out = new SharedArrayBuffer(bounds[ctx.size]);
  parts.forEach((p, i) => {
    new Uint8Array(out).set(p, bounds[i]);
  });
  return { sab: out, sizes };
}

async function scatter(ctx: OpContext, req: OpSpec): Promise<void> {
  const agreed = quiet(agree(ctx, scatterDescriptor(ctx.size, req.length, req.sizes), scatterMisfit(req.root)));
  const bpe = bytesPerElement(req.dtype);
  const sab = req.sab as SharedArrayBuffer;
  if (ctx.rank !== req.root) {
    await Promise.all([agreed, ctx.recvMessageInto(req.root, new Uint8Array(sab, 0, req.length * bpe))]);
    return;
  }
  const bounds = boundsFromSizes(req.sizes as number[]).map((b) => b * bpe);
  for (let p = 0; p < ctx.size; p++) {
    if (p !== ctx.rank) ctx.sendMessage(p, new Uint8Array(sab, bounds[p], bounds[p + 1] - bounds[p]));
  }
  await agreed;
}

async function allToAll(ctx: OpContext, req: OpSpec): Promise<void> {
  const agreed = quiet(agree(ctx, allToAllDescriptor(req.sizes as number[], req.outSizes as number[]), allToAllMisfit));
  const bpe = bytesPerElement(req.dtype);
  const sab = req.sab as SharedArrayBuffer;
  const inB = boundsFromSizes(req.sizes as number[]).map((b) => b * bpe);
  const outB = boundsFromSizes(req.outSizes as number[]).map((b) => b * bpe + inB[ctx.size]);
  const slot = (b: number[], p: number) => new Uint8Array(sab, b[p], b[p + 1] - b[p]);
  for (let p = 0; p < ctx.size; p++) if (p !== ctx.rank) ctx.sendMessage(p, slot(inB, p));
  const mineIn = slot(inB, ctx.rank);
  const mineOut = slot(outB, ctx.rank);
  if (mineIn.byteLength !== mineOut.byteLength) ctx.lengthMismatch(ctx.rank, mineOut.byteLength, mineIn.byteLength);
  mineOut.set(mineIn);
  await Promise.all(
    Array.from({ length: ctx.size }, (_, p) => (p === ctx.rank ? agreed : ctx.recvMessageInto(p, slot(outB, p)))),
  );
}

async function barrier(ctx: OpContext, _req: OpSpec): Promise<void> {
  await exchange(ctx, new Uint8Array(0), () => new Uint8Array(0));
}

const inPlace: Record<string, (ctx: OpContext, req: OpSpec) => Promise<void>> = {
  reduce,
  reduceScatter,
  allGatherInto,
  broadcast,
  scatter,
  allToAll,
  barrier,
};

/**
 * Runs one collective but allReduce (whose choice of algorithm is the Executor's); returns a new
 * buffer for ops whose output size varies.
 */
export async function runCollective(ctx: OpContext, req: OpSpec): Promise<OpResult | undefined> {
  if (req.op === 'allGather') return allGather(ctx, req);
  if (req.op === 'gather') return gather(ctx, req);
  const run = inPlace[req.op];
  if (!run) throw new Error(`unknown collective ${req.op}`);
  await run(ctx, req);
  return undefined;
}

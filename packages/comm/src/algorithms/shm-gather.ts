import type { CommArray, NumArray, ReduceOp } from '../dtypes.js';
import type { OpContext } from '../execution/op-context.js';
import { native, type SharedMemory } from '../native.js';
import type { ShmLane, ShmSteps } from '../transport/shm-lane.js';
import { finishAverage, NATIVE_OP, reduceInto } from './reduce.js';

type Ctor = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => NumArray;

/**
 * dst.set(src), a large one with non-temporal stores (@ddp/shm copyStreaming): the slots' copies in
 * and out skip the read-for-ownership of their destination (64 MiB, same run, shared host: 2 ranks
 * 20.5 vs 22.2 ms, 4 ranks 45.7 vs 52.5 ms; 8 of 10 alternating pairs faster).
 */
export function copyStreaming(dst: CommArray | Uint8Array, src: CommArray | Uint8Array): void {
  (native as SharedMemory).copyStreaming(dst, src);
}

/**
 * Reduces chunk `me` (this rank owns it) from every rank's input into `result` (not an input, so
 * the inputs stay whole for AVG's overflow fallback): the owner's and the first peer's values in
 * one pass of the addon, then the other peers in rank order, the order of the one-call exchange
 * (shm-exchange.ts), so a chunk has the same bits whichever of this host's paths reduced it.
 * AVG is left summed.
 */
export function reduceChunk(result: NumArray, inputs: readonly NumArray[], me: number, op: ReduceOp): void {
  const n = inputs.length;
  const first = me === 0 ? 1 : 0;
  if (n === 1) result.set(inputs[me] as NumArray);
  else (native as SharedMemory).reduce(inputs[me] as NumArray, inputs[first] as NumArray, NATIVE_OP[op], result);
  for (let r = first + 1; r < n; r++) if (r !== me) reduceInto(result, inputs[r] as NumArray, op);
}

/**
 * Reduce-scatter through the shared segment of a group on one host: rank r gets chunk r of
 * `data` (bounds in elements, the same on every rank) reduced over the group, in place. In
 * pieces: each rank's slot holds one sub-slot per owner; every rank copies its part of each
 * other owner's chunk into the owner's sub-slot, one step, then each owner reduces its chunk
 * from every slot (reduceChunk). One step per piece suffices: the next writer of a set has
 * passed the next piece's step, which every reader reaches only after reading this one.
 */
export function shmReduceScatter(
  ctx: OpContext,
  lane: ShmLane,
  data: NumArray,
  bounds: readonly number[],
  op: ReduceOp,
): Promise<void> {
  return lane.drive(reduceScatterSteps(ctx, lane, data, bounds, op), ctx);
}

function* reduceScatterSteps(
  ctx: OpContext,
  lane: ShmLane,
  data: NumArray,
  bounds: readonly number[],
  op: ReduceOp,
): ShmSteps {
  yield* lane.meet(ctx);
  const [n, me] = [lane.size, lane.rank];
  const C = data.constructor as Ctor;
  const sub = Math.floor(lane.slotBytes / data.BYTES_PER_ELEMENT / n);
  const chunk = (r: number) => data.subarray(bounds[r], bounds[r + 1]);
  for (let at = 0; at < longest(bounds); at += sub) {
    const part = (r: number) => chunk(r).subarray(at, at + sub);
    const set = lane.nextSet();
    const slot = (r: number, owner: number) => {
      const s = lane.slot(set, r);
      return new C(s.buffer, s.byteOffset + owner * sub * data.BYTES_PER_ELEMENT, part(owner).length);
    };
    for (let r = 0; r < n; r++) if (r !== me) copyStreaming(slot(me, r), part(r));
    yield* lane.step();
    const own = part(me);
    const inputs = Array.from({ length: n }, (_, r) => (r === me ? own : slot(r, me)));
    const result = slot(me, me);
    reduceChunk(result, inputs, me, op);
    if (op === 'avg') finishAverage(result, n, (r, i) => (inputs[r] as NumArray)[i]);
    copyStreaming(own, result);
  }
}

/**
 * All-gather through the shared segment of a group on one host: `bytes` holds every rank's
 * slot (bounds in bytes), this rank's filled; in pieces of a whole lane slot, each rank copies
 * its part in, one step (safe as in shmReduceScatter), then copies every peer's part out.
 */
export function shmAllGather(
  ctx: OpContext,
  lane: ShmLane,
  bytes: Uint8Array,
  bounds: readonly number[],
): Promise<void> {
  return lane.drive(allGatherSteps(ctx, lane, bytes, bounds), ctx);
}

function* allGatherSteps(ctx: OpContext, lane: ShmLane, bytes: Uint8Array, bounds: readonly number[]): ShmSteps {
  yield* lane.meet(ctx);
  const [n, me] = [lane.size, lane.rank];
  const part = (r: number, at: number) =>
    bytes.subarray(bounds[r] + at, Math.min(bounds[r + 1], bounds[r] + at + lane.slotBytes));
  for (let at = 0; at < longest(bounds); at += lane.slotBytes) {
    const set = lane.nextSet();
    const own = part(me, at);
    copyStreaming(lane.slot(set, me).subarray(0, own.length), own);
    yield* lane.step();
    for (let r = 0; r < n; r++)
      if (r !== me) copyStreaming(part(r, at), lane.slot(set, r).subarray(0, part(r, at).length));
  }
}

/** The largest chunk's length: every rank runs as many pieces, whatever its own chunk holds. */
function longest(bounds: readonly number[]): number {
  let most = 0;
  for (let r = 0; r + 1 < bounds.length; r++) most = Math.max(most, bounds[r + 1] - bounds[r]);
  return most;
}

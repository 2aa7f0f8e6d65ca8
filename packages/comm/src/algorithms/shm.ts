import type { CommArray, HalfDtype, NumArray, ReduceOp } from '../dtypes.js';
import type { OpContext } from '../execution/op-context.js';
import { ONE_STEP_BYTES } from '../transport/shm-exchange.js';
import type { ShmLane, ShmSteps } from '../transport/shm-lane.js';
import { combineHalves } from './half.js';
import { narrowHalf } from './half-codec.js';
import { type AcrossHosts, acrossHosts } from './hierarchical.js';
import { chunkBounds } from './partition.js';
import { finishAverage } from './reduce.js';
import { copyStreaming, reduceChunk } from './shm-gather.js';

type Ctor = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => CommArray;

/**
 * All-reduce through a shared segment, in pieces of one slot. Every rank copies its piece
 * into its slot (all but the chunk it owns, which only it reads); reduces the chunk it owns
 * from every slot into its own data and publishes the result in its slot; then copies every
 * other owner's result out. Each element is reduced once, by its owner, so all ranks get
 * identical results; per piece a rank copies (N−1)/N in, 1/N back and (N−1)/N out, with
 * no sockets and no kernel copies (those copies with non-temporal stores: copyStreaming below).
 * Half-precision words are reduced in float32, rounded once.
 * With `across` (a group spanning hosts; not for 16-bit words), `ctx` is this host's part and
 * each owner all-reduces its reduced chunk with the other hosts before publishing it
 * (hierarchical.ts), pieces pipelined (acrossHostsSteps).
 */
export function shmAllReduce(
  ctx: OpContext,
  lane: ShmLane,
  data: CommArray,
  op: ReduceOp,
  half: HalfDtype | null,
  across: AcrossHosts | null = null,
): Promise<void> {
  return lane.drive(shmAllReduceSteps(ctx, lane, data, op, half, across), ctx);
}

/**
 * shmAllReduce as the steps it waits on (ShmLane drives them): the same op runs on the event
 * loop or, small and on one host, at once on the calling thread (Executor.runNow).
 */
export function* shmAllReduceSteps(
  ctx: OpContext,
  lane: ShmLane,
  data: CommArray,
  op: ReduceOp,
  half: HalfDtype | null,
  across: AcrossHosts | null = null,
): ShmSteps {
  // small and on one host: one flag per op, in the addon (transport/shm-exchange.ts)
  if (!across && data.byteLength <= ONE_STEP_BYTES) return yield* lane.exchange(ctx, data, op, half);
  yield* lane.meet(ctx);
  if (across) return yield* acrossHostsSteps(lane, data as NumArray, op, across);
  const me = lane.rank;
  const elems = lane.slotBytes / data.BYTES_PER_ELEMENT;
  for (let start = 0; start < data.length; start += elems) {
    const p = pieceAt(lane, data, start, elems, false);
    const [own, result] = [p.chunk(me), p.slotted(me, me)];
    copyIn(lane, p);
    yield* lane.step();
    const inputs = p.inputs();
    if (half) {
      narrowHalf(combineHalves(inputs as Uint16Array[], half, op), half, result as Uint16Array);
      copyStreaming(own, result);
    } else if (op !== 'avg') reduceAndPublish(own as NumArray, inputs as NumArray[], me, op, result);
    else {
      // into the slot, so this rank's input stays whole for AVG's overflow fallback (finishAverage)
      reduceChunk(result as NumArray, inputs as NumArray[], me, op);
      finishAverage(result as NumArray, lane.size, (r, i) => (inputs[r] as NumArray)[i]);
      copyStreaming(own, result);
    }
    yield* copyOut(lane, p);
  }
}

/**
 * Piece bytes of a hierarchical all-reduce: a quarter of the comm lane's slot, so a 4 MiB all-reduce is
 * four pieces that pipeline (acrossHostsSteps) rather than one whose work inside the host adds to its
 * time on the link; half a slot at most (the main lane's are 64 KiB), leaving pieceAt's `fixed` room.
 */
const ACROSS_PIECE_BYTES = 1024 * 1024;

/**
 * The pieces of a hierarchical all-reduce, two deep on the lane's two sets: piece k+1 is copied in and
 * reduced inside the host while piece k crosses hosts, so the link, the slow part, does not wait for
 * shared memory. Crossings run one after another, each a collective among the owners of one chunk on
 * every host, in the same order on all of them. Piece k+1 is copied into the set of piece k−1 while
 * other ranks may still copy k−1's results out of it: each chunk keeps one place in every slot
 * (pieceAt's `fixed`), so the chunks a rank writes never overlap those it reads (a short last piece's
 * chunks did, and one element of a 4 MiB all-reduce came out wrong now and then).
 */
function* acrossHostsSteps(lane: ShmLane, data: NumArray, op: ReduceOp, across: AcrossHosts): ShmSteps {
  const me = lane.rank;
  const elems = Math.min(ACROSS_PIECE_BYTES, lane.slotBytes / 2) / data.BYTES_PER_ELEMENT;
  let landing: ShmSteps | null = null;
  let crossed: Promise<void> = Promise.resolve();
  for (let start = 0; start < data.length; start += elems) {
    const p = pieceAt(lane, data, start, elems, true);
    copyIn(lane, p);
    yield* lane.step();
    const inputs = p.inputs() as NumArray[];
    const result = p.slotted(me, me) as NumArray;
    // into the slot, so this rank's input stays whole for AVG's overflow fallback (hierarchical.ts)
    reduceChunk(result, inputs, me, op);
    crossed = crossed.then(() => acrossHosts(across, result, op, inputs));
    // awaited when the piece lands; meanwhile a failed wait on the lane must not leave it unhandled
    crossed.catch(() => {});
    if (landing) yield* landing;
    landing = land(lane, crossed, p);
  }
  if (landing) yield* landing;
}

/** A piece back from across hosts: its result published into this rank's data, the other owners' copied out. */
function* land(lane: ShmLane, crossed: Promise<void>, p: Piece): ShmSteps {
  yield crossed;
  copyStreaming(p.chunk(lane.rank), p.slotted(lane.rank, lane.rank));
  yield* copyOut(lane, p);
}

/** A piece of the caller's data and the slots of one set that carry it. */
interface Piece {
  /** Chunk r of the piece (group rank r reduces it). */
  chunk(r: number): CommArray;
  /** Where rank q's slot holds chunk r. */
  slotted(q: number, r: number): CommArray;
  /** The inputs of this rank's chunk: its own data, the others' slots. */
  inputs(): CommArray[];
}

/**
 * The piece of `data` from `start` (at most `elems` elements) over the next set's slots. `fixed`: chunk
 * r at r·⌈elems/N⌉ in every slot whatever the piece's length (needs N more elements of room).
 */
function pieceAt(lane: ShmLane, data: CommArray, start: number, elems: number, fixed: boolean): Piece {
  const C = data.constructor as Ctor;
  const piece = data.subarray(start, Math.min(data.length, start + elems));
  const b = chunkBounds(piece.length, lane.size);
  const at = (r: number) => (fixed ? r * Math.ceil(elems / lane.size) : b[r]);
  const set = lane.nextSet();
  const slots = Array.from({ length: lane.size }, (_, q) => {
    const s = lane.slot(set, q);
    return new C(s.buffer, s.byteOffset, s.byteLength / data.BYTES_PER_ELEMENT);
  });
  const chunk = (r: number) => piece.subarray(b[r], b[r + 1]);
  const slotted = (q: number, r: number) => slots[q].subarray(at(r), at(r) + b[r + 1] - b[r]);
  const me = lane.rank;
  return { chunk, slotted, inputs: () => slots.map((_, q) => (q === me ? chunk(me) : slotted(q, me))) };
}

/** This rank's piece into its slot, all but the chunk it owns (which only it reads). */
function copyIn(lane: ShmLane, p: Piece): void {
  for (let r = 0; r < lane.size; r++) if (r !== lane.rank) copyStreaming(p.slotted(lane.rank, r), p.chunk(r));
}

/** Once every owner published its chunk (the step), the chunks of the others copied into this rank's piece. */
function* copyOut(lane: ShmLane, p: Piece): ShmSteps {
  yield* lane.step();
  for (let r = 0; r < lane.size; r++) if (r !== lane.rank) copyStreaming(p.chunk(r), p.slotted(r, r));
}

/** copyStreaming's streaming size, and within a core's L2: a block reduced is published from cache. */
const PUBLISH_BLOCK_BYTES = 256 * 1024;

/**
 * The owned chunk reduced into this rank's own data, in place (the peers' values in reduceChunk's
 * order, so the bits are the same), and each block published to the slot while still in cache
 * (non-temporal stores). Reducing into the slot and copying back cost a read and a
 * read-for-ownership more per element: 6 passes over the chunk where this takes 4.
 */
function reduceAndPublish(own: NumArray, inputs: NumArray[], me: number, op: ReduceOp, result: CommArray): void {
  const block = PUBLISH_BLOCK_BYTES / own.BYTES_PER_ELEMENT;
  for (let i = 0; i < own.length; i += block) {
    const end = Math.min(own.length, i + block);
    const mine = own.subarray(i, end);
    reduceChunk(
      mine,
      inputs.map((input, r) => (r === me ? mine : input.subarray(i, end))),
      me,
      op,
    );
    copyStreaming(result.subarray(i, end), mine);
  }
}

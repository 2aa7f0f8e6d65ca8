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
 * (hierarchical.ts).
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
  const n = lane.size;
  const me = lane.rank;
  const C = data.constructor as Ctor;
  const cap = Math.floor(lane.slotBytes / data.BYTES_PER_ELEMENT);
  for (let start = 0; start < data.length; start += cap) {
    const piece = data.subarray(start, Math.min(data.length, start + cap));
    const b = chunkBounds(piece.length, n);
    const chunk = (a: CommArray, r: number) => a.subarray(b[r], b[r + 1]);
    const set = lane.nextSet();
    const slots = Array.from({ length: n }, (_, r) => {
      const s = lane.slot(set, r);
      return new C(s.buffer, s.byteOffset, piece.length);
    });
    const mine = slots[me] as CommArray;
    for (let r = 0; r < n; r++) if (r !== me) copyStreaming(chunk(mine, r), chunk(piece, r));
    yield* lane.step();
    const inputs = slots.map((s, r) => chunk(r === me ? piece : s, me));
    const own = chunk(piece, me);
    const result = chunk(mine, me);
    if (half) {
      narrowHalf(combineHalves(inputs as Uint16Array[], half, op), half, result as Uint16Array);
      copyStreaming(own, result);
    } else if (op !== 'avg' && !across) reduceAndPublish(own as NumArray, inputs as NumArray[], me, op, result);
    else {
      // into the slot, so this rank's input stays whole for AVG's overflow fallback (finishAverage)
      reduceChunk(result as NumArray, inputs as NumArray[], me, op);
      if (across) yield acrossHosts(across, result as NumArray, op, inputs as NumArray[]);
      else finishAverage(result as NumArray, n, (r, i) => (inputs[r] as NumArray)[i]);
      copyStreaming(own, result);
    }
    yield* lane.step();
    for (let r = 0; r < n; r++) if (r !== me) copyStreaming(chunk(piece, r), chunk(slots[r] as CommArray, r));
  }
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

import type { OpRequest } from './protocol.js';

/**
 * Which thread runs a collective. Small all-to-all-shaped collectives (every rank sends to
 * every other: allReduce, reduceScatter, allGatherInto, barrier) run on the main thread;
 * everything else, and everything large, on the comm thread. The rule reads only what all
 * ranks agree on when their calls match (op, element count, dtype, group size); when calls
 * differ, ranks may pick different threads, and because in these ops every rank sends to
 * every other, frames then reach a rank on the mesh it did not pick, which is reported as a
 * CollectiveMismatchError like any other difference.
 */
const MAIN_OPS = new Set<OpRequest['op']>(['allReduce', 'reduceScatter', 'allGatherInto', 'barrier']);

function limit(): number {
  const raw = process.env.DDP_MAIN_THREAD_BYTES;
  const v = Number(raw);
  return raw === undefined || raw === '' || !Number.isFinite(v) || v < 0 ? 16 * 1024 : v;
}

const MAIN_THREAD_BYTES = limit();

/**
 * True when the op runs on the main thread: (N−1)·bytes ≤ DDP_MAIN_THREAD_BYTES (16 KiB; 0 =
 * never), or any size in a group of one, where nothing travels and a trip to the comm thread
 * and back would be all the cost (DDP on one rank).
 */
export function onMainThread(op: OpRequest['op'], bytes: number, groupSize: number): boolean {
  if (MAIN_THREAD_BYTES === 0 || !MAIN_OPS.has(op)) return false;
  return groupSize === 1 || bytes * (groupSize - 1) <= MAIN_THREAD_BYTES;
}

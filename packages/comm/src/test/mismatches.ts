import type { CommArray, ProcessGroup } from '../index.js';

/**
 * Collectives that differ across the ranks of a group of three in one respect each: the root,
 * the count, the dtype, per-rank sizes, or the op itself. Every rank must raise
 * CollectiveMismatchError (agreement.child.ts).
 */
const f32 = (n: number) => new Float32Array(n);
const filled = (n: number, make: (n: number) => CommArray) => Array.from({ length: 3 }, () => make(n));

export const MISMATCHES: Record<string, (g: ProcessGroup) => Promise<unknown>> = {
  'broadcast src': (g) => g.broadcast(f32(5), { src: g.rank === 2 ? 2 : 0 }).wait(),
  'broadcast count': (g) => g.broadcast(f32(g.rank === 2 ? 6 : 5), { src: 0 }).wait(),
  'broadcast count at the root': (g) => g.broadcast(f32(g.rank === 0 ? 6 : 5), { src: 0 }).wait(),
  'broadcast dtype': (g) => g.broadcast(g.rank === 1 ? new Float64Array(5) : f32(5), { src: 0 }).wait(),
  'broadcast count, chain-sized': (g) => g.broadcast(f32(g.rank === 2 ? 300_001 : 300_000), { src: 0 }).wait(),
  'broadcast against allReduce': (g) =>
    g.rank === 2 ? g.allReduce(f32(5)).wait() : g.broadcast(f32(5), { src: 0 }).wait(),
  'reduce dst': (g) => g.reduce(f32(5), { dst: g.rank === 2 ? 1 : 0 }).wait(),
  'reduce op': (g) => g.reduce(f32(5), { dst: 0, op: g.rank === 1 ? 'max' : 'sum' }).wait(),
  'gather dst': (g) => g.gather(f32(3), { dst: g.rank === 2 ? 1 : 0 }).wait(),
  'gather dtype': (g) => g.gather(g.rank === 1 ? new Int32Array(3) : f32(3), { dst: 0 }).wait(),
  'scatter src': (g) => {
    const src = g.rank === 2 ? 1 : 0;
    return g.scatter(f32(2), { src, inputs: g.rank === src ? filled(2, f32) : undefined }).wait();
  },
  'scatter sizes': (g) =>
    g.scatter(f32(g.rank === 2 ? 3 : 2), { src: 0, inputs: g.rank === 0 ? filled(2, f32) : undefined }).wait(),
  'allGather dtype': (g) => g.allGather(g.rank === 1 ? new Int32Array(4) : f32(4)).wait(),
  'allGatherInto count': (g) => {
    const n = g.rank === 2 ? 5 : 4;
    return g.allGatherInto(f32(3 * n), f32(n)).wait();
  },
  'allToAll dtype': (g) => {
    const make = g.rank === 1 ? (n: number) => new Int32Array(n) : f32;
    return g.allToAll(filled(2, make), filled(2, make)).wait();
  },
  // rank 0 sends 3 elements to rank 1, which expects 2 (every other pair fits)
  'allToAll split sizes': (g) => g.allToAll(filled(2, f32), [f32(2), f32(g.rank === 0 ? 3 : 2), f32(2)]).wait(),
  'reduceScatter count': (g) => {
    const n = g.rank === 2 ? 3 : 2;
    return g.reduceScatter(f32(n), f32(3 * n)).wait();
  },
};

/** Calls that are invalid on rank 1 only (it raises InvalidArgumentError and goes on); the others call a valid one. */
export const BAD_CALLS: Record<string, (g: ProcessGroup) => Promise<unknown>> = {
  'unknown reduce op': (g) => g.allReduce(f32(5), { op: g.rank === 1 ? ('median' as 'sum') : 'sum' }).wait(),
  'broadcast src out of range': (g) => g.broadcast(f32(5), { src: g.rank === 1 ? 7 : 0 }).wait(),
  'allToAll of mixed array types': (g) =>
    g.allToAll(filled(2, g.rank === 1 ? (n) => new Int32Array(n) : f32), filled(2, f32)).wait(),
  // rank 1 is the src: its inputs' bytes would land reinterpreted in the others' float32 outputs
  'scatter of inputs of another array type than the output': (g) =>
    g.scatter(f32(2), { src: 1, inputs: g.rank === 1 ? filled(2, (n) => new Int32Array(n)) : undefined }).wait(),
};

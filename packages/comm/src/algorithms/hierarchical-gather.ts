import type { NumArray, ReduceOp } from '../dtypes.js';
import type { OpContext } from '../execution/op-context.js';

/**
 * Reduce-scatter and all-gather of a group spanning hosts evenly (host-layout.ts), so the
 * link carries each host's share once, as the hierarchical all-reduce does (hierarchical.ts):
 * with H hosts of L ranks and chunk p of the data for group rank p, local rank i gathers the
 * H chunks of the ranks holding local index i on every host ("its column"). Reduce-scatter:
 * inside the host, a reduce-scatter of the columns (local rank i gets its column summed over
 * the host), then across hosts one among the column (each gets its own chunk). All-gather:
 * across hosts first (each column complete), then inside the host. Per host, (H−1)/H of the
 * data crosses the link each way, against (N−1)/N per rank of a flat ring.
 */
export interface HostParts {
  /** The op among this host's members (group rank order). */
  local: OpContext;
  /** The op among the holders of this rank's local index on every host (host order). */
  across: OpContext;
  /** Group rank of (host, local index). */
  grid: readonly (readonly number[])[];
}

/** Chunk bounds of `parts` equal chunks of `size`. */
const even = (parts: number, size: number) => Array.from({ length: parts + 1 }, (_, k) => k * size);

/** A flat reduce-scatter: rank r of ctx gets chunk r (bounds in elements) of `data` reduced, in place. */
type FlatReduceScatter = (ctx: OpContext, data: NumArray, bounds: number[], op: ReduceOp) => Promise<void>;
/** A flat all-gather of the slots (bounds in bytes) of `bytes`. */
type FlatAllGather = (ctx: OpContext, bytes: Uint8Array, bounds: number[]) => Promise<void>;

/** Reduce-scatter of `data` (N chunks of n elements): this rank's chunk, reduced over the group, lands in place. */
export async function hierarchicalReduceScatter(
  parts: HostParts,
  data: NumArray,
  n: number,
  op: ReduceOp,
  flat: FlatReduceScatter,
): Promise<void> {
  const { grid } = parts;
  const [H, L, i, h] = [grid.length, grid[0]?.length ?? 0, parts.local.rank, parts.across.rank];
  const column = H * n;
  const byColumn = new (data.constructor as new (k: number) => NumArray)(L * column);
  for (let j = 0; j < L; j++)
    for (let k = 0; k < H; k++) {
      const p = (grid[k] as readonly number[])[j];
      byColumn.set(data.subarray(p * n, (p + 1) * n), j * column + k * n);
    }
  await flat(parts.local, byColumn, even(L, column), op);
  const mine = byColumn.subarray(i * column, (i + 1) * column);
  await flat(parts.across, mine, even(H, n), op);
  const me = (grid[h] as readonly number[])[i];
  data.set(mine.subarray(h * n, (h + 1) * n), me * n);
}

/** All-gather into `bytes` (N slots of `slot` bytes, this rank's filled). */
export async function hierarchicalAllGather(
  parts: HostParts,
  bytes: Uint8Array,
  slot: number,
  flat: FlatAllGather,
): Promise<void> {
  const { grid } = parts;
  const [H, L, i, h] = [grid.length, grid[0]?.length ?? 0, parts.local.rank, parts.across.rank];
  const column = H * slot;
  const at = (k: number, j: number) => (grid[k] as readonly number[])[j] * slot;
  const byColumn = new Uint8Array(L * column);
  byColumn.set(bytes.subarray(at(h, i), at(h, i) + slot), i * column + h * slot);
  await flat(parts.across, byColumn.subarray(i * column, (i + 1) * column), even(H, slot));
  await flat(parts.local, byColumn, even(L, column));
  for (let j = 0; j < L; j++)
    for (let k = 0; k < H; k++)
      bytes.set(byColumn.subarray(j * column + k * slot, j * column + (k + 1) * slot), at(k, j));
}

import { type CommError, type ProcessGroup, ReduceOp } from '@ddp/comm';

/**
 * The collective suite run under faults: allReduce (sum, avg, max), allGather, broadcast
 * from every root and reduceScatter, at a direct-exchange size and a ring size, each
 * compared bit for bit with a reference computed locally. Values are small integers, so
 * sums are exact in float32 whatever order a ring reduces in.
 */

export function value(rank: number, i: number, salt: number): number {
  return ((i * 7 + rank * 13 + salt * 5) % 11) - 5;
}

function generate(rank: number, n: number, salt: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = value(rank, i, salt);
  return a;
}

function reduced(op: 'sum' | 'avg' | 'max', size: number, n: number, salt: number, offset = 0): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let acc = value(0, i + offset, salt);
    for (let r = 1; r < size; r++)
      acc = op === 'max' ? Math.max(acc, value(r, i + offset, salt)) : acc + value(r, i + offset, salt);
    out[i] = op === 'avg' ? Math.fround(acc / size) : acc;
  }
  return out;
}

function sameBits(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

/** Direct exchange (7 elements) and ring (64 Ki elements = 256 KiB) sizes. */
export const SIZES = [7, 64 * 1024];

/** Runs the suite once; returns the names of the cases that differ from the reference. */
export async function collectiveSuite(pg: ProcessGroup, salt: number, sizes = SIZES): Promise<string[]> {
  const failures: string[] = [];
  const check = (what: string, got: Float32Array, want: Float32Array) => {
    if (!sameBits(got, want)) failures.push(`${what} (salt ${salt})`);
  };
  const { rank, size } = pg;
  for (const n of sizes) {
    for (const op of ['sum', 'avg', 'max'] as const) {
      const buf = generate(rank, n, salt);
      await pg.allReduce(buf, { op }).wait();
      check(`allReduce ${op} n=${n}`, buf, reduced(op, size, n, salt));
    }
    const gathered = (await pg.allGather(generate(rank, n, salt)).wait()) as Float32Array[];
    for (let r = 0; r < size; r++)
      check(`allGather n=${n} from ${r}`, gathered[r] as Float32Array, generate(r, n, salt));
    for (let root = 0; root < size; root++) {
      const buf = rank === root ? generate(root, n, salt) : new Float32Array(n);
      await pg.broadcast(buf, { src: root }).wait();
      check(`broadcast n=${n} root=${root}`, buf, generate(root, n, salt));
    }
    const out = new Float32Array(n);
    await pg.reduceScatter(out, generate(rank, n * size, salt), { op: ReduceOp.SUM }).wait();
    check(`reduceScatter n=${n}`, out, reduced('sum', size, n, salt, rank * n));
  }
  return failures;
}

/** What a rank reports about the error that ended its run. */
export function describeError(e: unknown): { error: string; message: string; ranks?: number[]; op?: string } {
  const c = e as CommError;
  return { error: c?.name ?? 'unknown', message: String(c?.message ?? e).slice(0, 300), ranks: c?.ranks, op: c?.op };
}

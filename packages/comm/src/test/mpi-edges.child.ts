import { floatToBfloat, floatToHalf } from '@ddp/half';
import type { CommArray, Dtype, HalfDtype } from '../dtypes.js';
import { destroyProcessGroup, initProcessGroup } from '../index.js';
import { Checker } from './checker.js';
import { makeArray } from './reference.js';

/**
 * Edges of the mpi backend (2 ranks): MAX and MIN propagate a NaN of one rank (MPI_MAX on
 * floats would drop it, or keep it depending on the order), in every float dtype; then a
 * receive larger than what was sent is an error on the receiver (MPI completes it silently),
 * and the next call fails on both ranks.
 */
const g = await initProcessGroup({ backend: 'mpi', timeoutMs: 30_000 });
const c = new Checker();
const word = (d: Dtype, v: number) => (d === 'float16' ? floatToHalf(v) : d === 'bfloat16' ? floatToBfloat(v) : v);
const isNaNWord = (d: Dtype, w: number) =>
  d === 'float16'
    ? (w & 0x7c00) === 0x7c00 && (w & 0x3ff) !== 0
    : d === 'bfloat16'
      ? (w & 0x7f80) === 0x7f80 && (w & 0x7f) !== 0
      : Number.isNaN(w);
for (const d of ['float32', 'float64', 'float16', 'bfloat16'] as const) {
  for (const op of ['max', 'min'] as const) {
    // NaN first on rank 0, then on rank 1: both orders of the comparison
    for (const at of [0, 1]) {
      const a: CommArray = makeArray(d, 3);
      [g.rank === at ? Number.NaN : 1, 2 + g.rank, -g.rank].forEach((v, i) => {
        a[i] = word(d, v);
      });
      await g.allReduce(a, { op, ...(d === 'float16' || d === 'bfloat16' ? { dtype: d as HalfDtype } : {}) }).wait();
      c.ok(`${op} ${d}, NaN on rank ${at}: element 0 is NaN`, isNaNWord(d, a[0]));
      c.ok(`${op} ${d}, NaN on rank ${at}: element 1`, a[1] === word(d, op === 'max' ? 3 : 2));
    }
  }
}
let shortReceive = 'none';
if (g.rank === 0) await g.send(new Float32Array(4), 1).wait();
else
  await g
    .recv(new Float32Array(6), 0)
    .wait()
    .catch((e: Error) => (shortReceive = `${e.name}: ${e.message}`));
// the receiver's group failed: its next call is refused there, and so on the sender
let after = 'ok';
try {
  await g.barrier().wait();
} catch (e) {
  after = (e as Error).name;
}
c.report({ rank: g.rank, shortReceive, after });
await destroyProcessGroup();

import { floatToBfloat, floatToHalf } from '@ddp/half';
import type { CommArray, Dtype, HalfDtype } from '../dtypes.js';
import { destroyProcessGroup, duplicateGroup, initProcessGroup } from '../index.js';
import { Checker } from './checker.js';
import { makeArray } from './reference.js';

/**
 * Edges of the mpi backend (2 ranks): MAX and MIN propagate a NaN of one rank (MPI_MAX on
 * floats would drop it, or keep it depending on the order), in every float dtype; then a
 * receive larger than what was sent is an error on the receiver (MPI completes it silently),
 * and the next call fails on both ranks; sends and receives at once complete, large or small.
 */
const g = await initProcessGroup({ backend: 'mpi', timeoutMs: 30_000 });
const spare = await duplicateGroup(g); // for a send left in flight at the end: g's calls fail before that
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
// Works issued back to back on one array (not awaited in between): each reads what the earlier wrote, as on the
// default backend; rank 1 issues late, so rank 0 stages its later calls while the earlier one waits in MPI.
// Before: a later call's input was staged at the call (widened halves, p2p, scatter/allToAll copies), and an earlier
// call's copy-out overwrote a later in-place result: silently other values, different on the two ranks.
const late = () => new Promise((resolve) => setTimeout(resolve, g.rank === 1 ? 200 : 0));
await late();
const h = Uint16Array.of(floatToHalf(g.rank + 1));
await Promise.all([g.allReduce(h, { dtype: 'float16' }).wait(), g.allReduce(h, { dtype: 'float16' }).wait()]);
c.ok('two float16 all-reduces of one array: 2 × (1 + 2)', h[0] === floatToHalf(6));
await late();
const x = Int32Array.of(g.rank + 1);
await Promise.all([g.allReduce(x).wait(), g.allReduce(x, { op: 'avg' }).wait()]);
c.ok('an int32 sum, then its average: 3', x[0] === 3);
await late();
const y = Float32Array.of(g.rank + 1);
const received = new Float32Array(1);
const sent = g.allReduce(y);
const moved = g.rank === 0 ? g.send(y, 1) : g.recv(received, 0);
await Promise.all([sent.wait(), moved.wait()]);
c.ok('an all-reduce, then a send of its result', g.rank === 0 || received[0] === 3);
await late();
const o = new Float32Array(2);
await Promise.all([g.allGatherInto(o, Float32Array.of(g.rank + 1)).wait(), g.allReduce(o).wait()]);
c.ok('allGatherInto, then an all-reduce of its output: [2, 4]', o[0] === 2 && o[1] === 4);
const z = Float32Array.of(g.rank === 0 ? 5 : 0);
const first = g.rank === 0 ? g.send(z, 1) : g.recv(z, 0);
if (g.rank === 0) z[0] = 1; // the send staged 5 at its call, which is its value when sent
await Promise.all([first.wait(), g.allReduce(z).wait()]);
c.ok('a receive, then an all-reduce of what it received: 6 on both ranks', z[0] === 6);
// a send and a receive at once past Open MPI's eager limit (~4 KB): the send waited for its receive on the MPI
// thread, while the peer's matching receive queued behind the peer's own send (probe CJ: CommTimeoutError)
for (const n of [1100, 1 << 18]) {
  const [mine, theirs] = [new Float32Array(n).fill(g.rank + 1), new Float32Array(n)];
  await Promise.all([g.send(mine, 1 - g.rank).wait(), g.recv(theirs, 1 - g.rank).wait()]);
  c.ok(
    `a send and a receive of ${4 * n} bytes at once`,
    theirs.every((v) => v === 2 - g.rank),
  );
}

// counts that fit one by one but not in all (2^31 + 2 float16 elements): MPI's int displacements overflowed
// on a group of its own: a refused call fails its group
const bigGather = await (await duplicateGroup(g))
  .allGather(new Uint16Array(2 ** 30 + 1), { dtype: 'float16' })
  .wait()
  .then(
    () => 'ok',
    (e: Error) => `${e.name}: ${e.message}`,
  );
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
c.report({ rank: g.rank, shortReceive, after, bigGather });
// a send still in flight at destroyProcessGroup is delivered and resolves (it was failed while its data arrived)
const big = new Float32Array(1 << 16).fill(g.rank === 0 ? 7 : 0);
let inFlight: string;
if (g.rank === 0) {
  const sending = spare.send(big, 1).wait();
  await destroyProcessGroup();
  inFlight = await sending.then(
    () => 'completed',
    (e: Error) => `${e.name}: ${e.message}`,
  );
} else {
  await new Promise((resolve) => setTimeout(resolve, 300));
  await spare.recv(big, 0).wait();
  inFlight = big.every((v) => v === 7) ? 'received' : 'other values';
  await destroyProcessGroup();
}
console.log(`RESULT ${JSON.stringify({ inFlight })}`);

import type { Dtype } from '../dtypes.js';
import { destroyProcessGroup, initProcessGroup, type ProcessGroup } from '../index.js';
import { Checker } from './checker.js';
import { DTYPES, OPS } from './reference.js';
import { issue, type ScenarioArgs, type ScenarioName } from './scenarios.js';

/**
 * Every collective, op, root and dtype at sizes 0, 1 and 7 (and, with --large, 17 MiB in
 * float32 and float16), each checked against a local reference. Args: [--large]
 */
const large = process.argv.includes('--large');
const pg = await initProcessGroup({ timeoutMs: 60_000 });
const c = new Checker();
let salt = 0;

async function run(g: ProcessGroup, what: ScenarioName, args: Omit<ScenarioArgs, 'salt'>): Promise<void> {
  const s = issue(g, what, { ...args, salt: ++salt });
  await s.done;
  s.check(c);
}

async function suite(g: ProcessGroup, d: Dtype, n: number): Promise<void> {
  const roots = Array.from({ length: g.size }, (_, r) => r);
  for (const op of OPS) await run(g, 'allReduce', { d, n, op });
  for (const op of ['sum', 'max'] as const) await run(g, 'reduceScatter', { d, n, op });
  for (const root of roots) {
    await run(g, 'broadcast', { d, n, root });
    await run(g, 'reduce', { d, n, root, op: root % 2 ? 'max' : 'sum' });
    await run(g, 'gather', { d, n, root });
    await run(g, 'scatter', { d, n, root });
  }
  for (const what of ['allGatherInto', 'allGather', 'allToAll', 'p2p', 'barrier'] as const)
    await run(g, what, { d, n });
}

for (const d of DTYPES) for (const n of [0, 1, 7]) await suite(pg, d, n);
if (large) {
  // 17 MiB in total per collective
  const n = (17 * 1024 * 1024) / 4;
  await run(pg, 'allReduce', { d: 'float32', n });
  await run(pg, 'broadcast', { d: 'float32', n, root: pg.size - 1 });
  await run(pg, 'reduceScatter', { d: 'float32', n: Math.floor(n / pg.size) });
  await run(pg, 'allGatherInto', { d: 'float32', n: Math.floor(n / pg.size) });
  await run(pg, 'allReduce', { d: 'float16', n: 2 * n, op: 'max' });
  // reduced in place in blocks and published from cache (algorithms/shm.ts): other ops and dtypes than the sum
  // (just over one 4 MiB slot: pieces, blocks and a tail)
  await run(pg, 'allReduce', { d: 'int32', n: n / 4 + 5, op: 'max' });
  await run(pg, 'allReduce', { d: 'float64', n: n / 8 + 3, op: 'product' });
}
c.report({ rank: pg.rank });
await destroyProcessGroup();

/**
 * `pnpm bench shm-wait`: how a shared-memory wait should sleep. 4 KiB all-reduces back to
 * back on 2 ranks (the main thread's lane), warm, under each wait policy of
 * packages/comm/src/transport/shm-lane.ts (forced through DDP_SHM_SPIN_MS / DDP_SHM_BLOCK_MS),
 * and over Unix sockets for scale. The defaults in packages/comm/src/execution/tuning.ts come
 * from this. Writes results/shm-wait.{json,md,png}.
 *
 *   node --conditions=@ddp/source --import tsx apps/bench/src/shm-wait.ts [--iters=3000]
 */
import { fileURLToPath } from 'node:url';
import { destroyProcessGroup, initProcessGroup, sharedArray } from '@ddp/comm';
import { CHARTS } from './lib/charts.js';
import { benchCommand, positiveInt, rankFlag } from './lib/flags.js';
import { printSample, runSampleWorld } from './lib/world.js';

const flags = benchCommand('shm-wait', 'how a shared-memory wait should sleep')
  .option('--iters <n>', 'all-reduces per run', positiveInt, 3000)
  .addOption(rankFlag())
  .parse()
  .opts<{ iters: number; rank?: boolean }>();
const ITERS = flags.iters;
const REPS = 3;
/** ~0 ms: the wait policies take milliseconds and only positive values. */
const OFF = '0.0001';
const POLICIES: [string, Record<string, string>][] = [
  ['thread pool only', { DDP_SHM_SPIN_MS: OFF, DDP_SHM_BLOCK_MS: OFF }],
  ['blocking futex, no spin', { DDP_SHM_SPIN_MS: OFF }],
  ['spin, no blocking', { DDP_SHM_BLOCK_MS: OFF }],
  ['spin then blocking futex (default)', {}],
  ['Unix sockets', { DDP_TRANSPORT: 'uds' }],
];

/** One rank: REPS timed loops of ITERS all-reduces after as many warm-up ones. */
async function rankMain(): Promise<void> {
  const pg = await initProcessGroup({ timeoutMs: 120_000 });
  const buf = sharedArray(Float32Array, 1024).fill(1);
  for (let i = 0; i < ITERS; i++) await pg.allReduce(buf).wait();
  for (let rep = 0; rep < REPS; rep++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < ITERS; i++) await pg.allReduce(buf).wait();
    if (pg.rank === 0) printSample({ us: Number(process.hrtime.bigint() - t0) / 1e3 / ITERS });
  }
  await destroyProcessGroup();
}

async function main(): Promise<void> {
  const self = fileURLToPath(import.meta.url);
  const rows: { policy: string; rep: number; us: number }[] = [];
  for (const [policy, env] of POLICIES) {
    const args = ['--conditions=@ddp/source', '--import', 'tsx', self, '--rank', `--iters=${ITERS}`];
    const samples = (
      await runSampleWorld<{ us: number }>(2, process.execPath, args, { env, timeoutMs: 300_000 })
    ).flat();
    for (const [rep, s] of samples.entries()) rows.push({ policy, rep: rep + 1, us: Number(s.us.toFixed(1)) });
    console.log(`${policy}: ${samples.map((s) => `${s.us.toFixed(1)} µs`).join(', ')}`);
  }
  const notes =
    `4 KiB all-reduce (float32, sum) back to back on 2 ranks, µs per op: ${REPS} timed loops of ` +
    `${ITERS} after ${ITERS} warm-up ones, per wait policy.`;
  const { writeReport } = await import('@ddp/plot');
  const files = await writeReport(fileURLToPath(new URL('../results', import.meta.url)), 'shm-wait', rows, {
    meta: { iters: ITERS, reps: REPS },
    notes,
    chart: CHARTS['shm-wait'].chart({}, rows),
  });
  console.log(notes);
  console.log(`wrote ${files.join(', ')}`);
}

if (flags.rank) await rankMain();
else await main();

// A world of checkpoint.multiprocess.test.ts: trains the uneven MLP with FSDP and Adam on 12 rows
// per step split over the ranks, optionally resuming from the newest checkpoint in `dir` and saving
// (synchronously or with AsyncCheckpointer, which may save into several directories) after given
// steps; compares with a single-process run of every step from the start. Prints RESULT
// { rank, resumedAt, maxDiff, destroyed: destroyProcessGroup's error or null }.
import { type Tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, mse, type Sequential } from '@ddp/nn';
import { AsyncCheckpointer, fullyShard, loadFSDPCheckpoint, saveFSDPCheckpoint } from '../index.js';
import { batch, flatValues, unevenMlp } from './model.js';

interface Args {
  dir: string;
  steps: number;
  load?: boolean;
  saveSyncAt?: number;
  /** The sync save not awaited: training goes on while it writes. */
  syncDetached?: boolean;
  /** AsyncCheckpointer saves: after step `at`, into `dir` (default: args.dir); `detached`: never awaited */
  asyncSaves?: { at: number; dir?: string; detached?: boolean }[];
  /** The optimizer lists the shards in reverse order (the saving run listed them in module order). */
  reverseOrder?: boolean;
}
const args = JSON.parse(process.argv[2]) as Args;
const group = await initProcessGroup({ timeoutMs: 30_000 });
const { rank, size } = group;

async function train(forward: (x: Tensor) => Promise<Tensor>, t: number, from: number, to: number): Promise<void> {
  const { x, y } = batch(t, 6, 5, false, from, to);
  const out = await forward(x);
  const loss = tidy(() => mse(out, y));
  for (const z of [out, x, y]) z.dispose();
  await loss.backward();
  loss.dispose();
}

const model: Sequential = unevenMlp();
for (const i of [0, 2]) fullyShard(model.at(i));
const root = fullyShard(model);
const opt = new Adam(args.reverseOrder ? root.parameters().reverse() : root.parameters(), { lr: 0.01 });
const saver = new AsyncCheckpointer(root);
let start = 0;
if (args.load) start = (await loadFSDPCheckpoint(args.dir, { root, optimizer: opt })).step;
const pending: Promise<unknown>[] = [];
for (let t = start; t < args.steps; t++) {
  await train((x) => root.forward(x), t, (rank * 12) / size, ((rank + 1) * 12) / size);
  opt.step();
  opt.zeroGrad();
  if (t + 1 === args.saveSyncAt) {
    const saving = saveFSDPCheckpoint(args.dir, { root, optimizer: opt, step: t + 1 });
    if (args.syncDetached) pending.push(saving);
    else await saving;
  }
  for (const s of args.asyncSaves ?? []) {
    if (s.at !== t + 1) continue;
    const saving = saver.save(s.dir ?? args.dir, { optimizer: opt, step: t + 1 });
    if (s.detached) void saving;
    else pending.push((await saving).done);
  }
}
await Promise.all(pending);

const ref = unevenMlp();
const refOpt = new Adam(ref.parameters(), { lr: 0.01 });
for (let t = 0; t < args.steps; t++) {
  await train(async (x) => tidy(() => ref.forward(x)), t, 0, 12);
  refOpt.step();
  refOpt.zeroGrad();
}
const params = await root.summonFullParams(() => flatValues(model.parameters()));
const want = flatValues(ref.parameters());
const maxDiff = params.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i])), 0);
// destroyProcessGroup waits for a detached save, and raises its failure
const destroyed = await destroyProcessGroup().then(
  () => null,
  (error: Error) => `${error.name}: ${error.message}`,
);
console.log(`RESULT ${JSON.stringify({ rank, resumedAt: start, maxDiff, destroyed })}`);

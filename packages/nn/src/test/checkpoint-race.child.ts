// One of several processes saving into one checkpoint directory at once (checkpoint-race.test.ts),
// as every rank of a job would: writer RANK saves steps 0 … saves-1, once every writer has started,
// and prints for each save the entry it committed and when it began and ended (the monotonic clock,
// which the processes share).
//   node checkpoint-race.child.ts <dir> <saves>
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { saveCheckpoint } from '../checkpoint.js';
import { modelAtStep } from './checkpoint-crash-model.js';

const [dir, saves] = process.argv.slice(2) as [string, string];
const writer = Number(process.env.RANK);
const ready = `${dir}.ready`; // a barrier: one file per writer that has started
await mkdir(ready, { recursive: true });
await writeFile(`${ready}/${writer}`, '');
while ((await readdir(ready)).length < Number(process.env.WORLD_SIZE)) await sleep(2);
for (let step = 0; step < Number(saves); step++) {
  const model = modelAtStep(step);
  const start = process.hrtime.bigint();
  const entry = await saveCheckpoint(dir, { model, step });
  const end = process.hrtime.bigint();
  model.dispose();
  console.log(`RESULT ${JSON.stringify({ writer, step, entry, start: String(start), end: String(end) })}`);
}

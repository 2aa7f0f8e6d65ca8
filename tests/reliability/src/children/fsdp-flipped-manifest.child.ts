// An FSDP checkpoint of step 5 whose manifest has one bit flipped after the save ("step": 5 → 7),
// then loaded. argv: checkpoint dir. Prints the load's error, if any, and the step it returned.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { fullyShard, loadFSDPCheckpoint, saveFSDPCheckpoint } from '@ddp/fsdp';
import { Adam, Generator, Linear, latestEntry, Sequential } from '@ddp/nn';

const dir = String(process.argv[2]);
const group = await initProcessGroup({ timeoutMs: 20_000 });
const root = fullyShard(new Sequential(new Linear(4, 3, { generator: new Generator(1) })));
await saveFSDPCheckpoint(dir, { root, optimizer: new Adam(root.parameters(), { lr: 0.1 }), step: 5 });
const manifest = join(String(await latestEntry(dir, 'manifest.json')), 'manifest.json');
if (group.rank === 0) {
  const bytes = await readFile(manifest);
  bytes[bytes.indexOf('"step": 5') + 8] ^= 0x02; // '5' → '7'
  await writeFile(manifest, bytes);
}
await group.barrier().wait();
let error: string | null = null;
let step: number | null = null;
try {
  step = (await loadFSDPCheckpoint(dir, { root })).step;
} catch (e) {
  error = `${(e as Error).name}: ${(e as Error).message}`;
}
console.log(`RESULT ${JSON.stringify({ rank: group.rank, error, step })}`);
await destroyProcessGroup();

// An FSDP checkpoint saved from a model whose batch norm tracks no running statistics, loaded
// into one that does (the same parameters; a buffer added since the save). argv: checkpoint dir.
// Prints the load's error, if any, and the loading model's running_mean afterwards.
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { fullyShard, loadFSDPCheckpoint, saveFSDPCheckpoint } from '@ddp/fsdp';
import { Adam, BatchNorm1d, Generator, Linear, Sequential } from '@ddp/nn';

const dir = String(process.argv[2]);
const group = await initProcessGroup({ timeoutMs: 20_000 });
const model = (trackRunningStats: boolean) =>
  new Sequential(new Linear(4, 3, { generator: new Generator(1) }), new BatchNorm1d(3, { trackRunningStats }));
const saved = fullyShard(model(false));
await saveFSDPCheckpoint(dir, { root: saved, optimizer: new Adam(saved.parameters(), { lr: 0.1 }), step: 1 });
const target = model(true);
const root = fullyShard(target);
let error: string | null = null;
try {
  await loadFSDPCheckpoint(dir, { root });
} catch (e) {
  error = `${(e as Error).name}: ${(e as Error).message}`;
}
const runningMean = Array.from(new Map(target.namedBuffers()).get('1.running_mean')?.dataSync() ?? []);
console.log(`RESULT ${JSON.stringify({ rank: group.rank, error, runningMean })}`);
await destroyProcessGroup();

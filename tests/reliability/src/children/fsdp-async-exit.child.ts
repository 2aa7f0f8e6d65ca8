// An FSDP AsyncCheckpointer save of step 2 over a committed step 1, left in flight: the script
// destroys the process group and ends without awaiting `done`. argv: checkpoint dir.
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { AsyncCheckpointer, fullyShard, saveFSDPCheckpoint } from '@ddp/fsdp';
import { Adam, Generator, Linear, Sequential } from '@ddp/nn';

const dir = String(process.argv[2]);
await initProcessGroup({ timeoutMs: 20_000 });
const root = fullyShard(new Sequential(new Linear(64, 64, { generator: new Generator(1) })));
const optimizer = new Adam(root.parameters(), { lr: 0.1 });
await saveFSDPCheckpoint(dir, { root, optimizer, step: 1 });
await new AsyncCheckpointer(root).save(dir, { optimizer, step: 2 });
await destroyProcessGroup();

// A rank of sharded-checkpoint.multiprocess.test.ts's generator test: each rank draws a stream of
// its own (seeded by rank, as dropout's usually is) or all one stream, and saves a sharded
// checkpoint with it; or resumes and reports the generator state it got back (or the error).
//   argv: 'save' | 'load', dir, 'own' | 'shared'
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, Generator, Linear } from '@ddp/nn';
import { loadShardedCheckpoint, saveShardedCheckpoint, ZeroRedundancyOptimizer } from '../index.js';

const [phase, dir, streams] = process.argv.slice(2);
const group = await initProcessGroup({ timeoutMs: 30_000 });
const model = new Linear(4, 2, { generator: new Generator(1) });
const optimizer = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
let result: unknown;
if (phase === 'save') {
  const generator = new Generator(streams === 'own' ? 1000 + group.rank : 7);
  generator.normal(streams === 'own' ? 3 + group.rank : 3);
  await saveShardedCheckpoint(dir, { model, optimizer, generator, step: 1 });
  result = generator.getState();
} else {
  const generator = new Generator(0);
  result = await loadShardedCheckpoint(dir, { model, optimizer, generator }).then(
    () => generator.getState(),
    (error: Error) => `${error.name}: ${error.message}`,
  );
}
console.log(`RESULT ${JSON.stringify({ rank: group.rank, result })}`);
optimizer.dispose();
await destroyProcessGroup();

// Test-only: one rank of contrastive.multiprocess.test.ts, started with the torchrun environment.
// Runs every case of its world size, averages the gradients over ranks (what DDP does) and
// prints them with its local loss; then gathers rows whose width differs by rank (misfit).
import { tensor } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup, ReduceOp } from '@ddp/comm';
import { allGatherWithGrad } from '../gather.js';
import { casesFor, runCase } from './cases.js';

const group = await initProcessGroup({ timeoutMs: 30_000 });
const results: Record<string, { loss: number; grads: Record<string, number[]> }> = {};
for (const c of casesFor(group.size)) {
  const { loss, grads, leaves } = await runCase(c, group);
  for (const [k, g] of Object.entries(grads)) {
    const buf = Float32Array.from(g);
    await group.allReduce(buf, { op: ReduceOp.AVG }).wait();
    grads[k] = Array.from(buf);
  }
  for (const t of Object.values(leaves)) t.dispose();
  results[c.name] = { loss, grads };
}
// rows of [4] on rank 0, of [2] elsewhere: the same number of floats per rank
const [n, d] = group.rank === 0 ? [2, 4] : [4, 2];
const misfit = await allGatherWithGrad(tensor(new Float32Array(n * d).fill(1), [n, d]), group).then(
  () => 'gathered',
  (e: Error) => `${e.name}: ${e.message}`,
);
console.log(`RESULT ${JSON.stringify({ rank: group.rank, results, misfit })}`);
await destroyProcessGroup();

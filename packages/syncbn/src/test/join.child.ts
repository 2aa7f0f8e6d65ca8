// One rank of join.multiprocess.test.ts: DDP over a Linear and a SyncBatchNorm under join, rank r
// taking 2 + r batches; argv[2] 'throw' joins with throwOnEarlyTermination. Prints the error.
import { tensor } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { join } from '@ddp/join';
import { Linear, Module } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';
import { SyncBatchNorm } from '../index.js';

const group = await initProcessGroup({ timeoutMs: 20_000 });
class Net extends Module {
  readonly lin = this.registerModule('lin', new Linear(3, 3));
  readonly bn = this.registerModule('bn', new SyncBatchNorm(3));
  // not declared async, as such forwards are often written: the promise is SyncBatchNorm's
  forward(x: ReturnType<typeof tensor>) {
    return this.bn.forwardAsync(this.lin.forward(x));
  }
}
const ddp = await DistributedDataParallel.create(new Net());
const x = tensor([1, 2, 3, 4, 5, 7], [2, 3]);
const error = await join(
  [ddp],
  async () => {
    for (let i = 0; i < 2 + group.rank; i++) {
      const y = await ddp.forward(x);
      const loss = y.sum();
      await loss.backward();
      loss.dispose();
      y.dispose();
    }
  },
  { throwOnEarlyTermination: process.argv[2] === 'throw' },
).then(
  () => null,
  (e: Error) => ({ name: e.name, message: e.message }),
);
console.log(`RESULT ${JSON.stringify({ rank: group.rank, error })}`);
await destroyProcessGroup().catch(() => {});
process.exit(0);

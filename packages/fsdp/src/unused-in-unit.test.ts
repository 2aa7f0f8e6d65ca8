import { fromTf, type Tensor } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Linear, Module, SGD } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { fullyShard } from './fully-shard.js';

beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
});
afterAll(async () => {
  await destroyProcessGroup();
});

/** Two branches in one unit; `useC` false leaves c out of the loss (a branch taken on some steps). */
class TwoBranches extends Module {
  readonly a = this.registerModule('a', new Linear(3, 2));
  readonly c = this.registerModule('c', new Linear(3, 2));
  useC = true;
  forward(x: Tensor): Tensor {
    return this.useC ? this.a.forward(x).add(this.c.forward(x)) : this.a.forward(x);
  }
}

// was silent: c's part of the unit's flat gradient became zeros, and momentum and weight decay moved c on the
// steps the loss left it out (one process leaves a parameter without a gradient alone)
it('a parameter the loss leaves out while the rest of its unit is used is not stepped, as in one process', async () => {
  const [net, ref] = [new TwoBranches(), new TwoBranches()];
  ref.loadStateDict(net.stateDict());
  const root = fullyShard(net);
  const hyper = { lr: 0.1, momentum: 0.9, weightDecay: 0.1 };
  const [opt, refOpt] = [new SGD(root.parameters(), hyper), new SGD(ref.parameters(), hyper)];
  const x = fromTf(tf.ones([4, 3]));
  for (const useC of [true, false, false]) {
    net.useC = ref.useC = useC;
    const y = (await root.forward(x)) as Tensor;
    await y.sum().backward();
    const z = ref.forward(x);
    await z.sum().backward();
    for (const o of [opt, refOpt]) {
      o.step();
      o.zeroGrad();
    }
  }
  x.dispose();
  const values = (m: Module) => m.parameters().map((p) => [...(p.data.dataSync() as Float32Array)]);
  const sharded = await root.summonFullParams(() => values(net));
  const want = values(ref);
  const diff = sharded.flat().reduce((m, e, k) => Math.max(m, Math.abs(e - want.flat()[k])), 0);
  expect(diff).toBeLessThan(1e-6);
});

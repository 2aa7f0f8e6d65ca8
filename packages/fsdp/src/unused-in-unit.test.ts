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

// was silent: c's slice of the flat gradient became zeros and momentum moved c on steps it was unused
it('a parameter unused while the rest of its unit is used: one warning naming it, once', async () => {
  const warnings: Error[] = [];
  const listen = (w: Error) => warnings.push(w);
  process.on('warning', listen);
  try {
    const net = new TwoBranches();
    const root = fullyShard(net);
    const opt = new SGD(root.parameters(), { lr: 0.1, momentum: 0.9 });
    const x = fromTf(tf.ones([4, 3]));
    for (const useC of [true, false, false]) {
      net.useC = useC;
      const y = (await root.forward(x)) as Tensor;
      await y.sum().backward();
      opt.step();
      opt.zeroGrad();
    }
    x.dispose();
    await new Promise((r) => setImmediate(r));
    const ours = warnings.filter((w) => (w as Error & { code?: string }).code === 'DDP_FSDP_PARTLY_UNUSED_UNIT');
    expect(ours).toHaveLength(1);
    expect(ours[0].message).toMatch(/fullyShard unit TwoBranches: c\.weight, c\.bias got no gradient on rank 0/);
  } finally {
    process.off('warning', listen);
  }
});

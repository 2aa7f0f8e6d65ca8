import { randn } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Dropout, Linear, mse, Sequential, SGD } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FSDPError } from './errors.js';
import { fullyShard } from './fully-shard.js';

beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
});
afterAll(async () => {
  await destroyProcessGroup();
});

it('refuses options it does not know, and a boolean option given a string (truthy: taken as true)', () => {
  expect(() => fullyShard(new Linear(3, 2), { reshard_after_forward: false } as never)).toThrow(
    /fullyShard: unknown option "reshard_after_forward"; did you mean reshardAfterForward\?/,
  );
  for (const name of ['reshardAfterForward', 'prefetch']) {
    const make = () => fullyShard(new Linear(3, 2), { [name]: 'false' });
    expect(make).toThrow(FSDPError);
    expect(make).toThrow(`fullyShard: ${name} must be a boolean, got "false"`);
  }
  // truthy: the gradients were synchronized where accumulating without communication was meant
  expect(() => fullyShard(new Linear(3, 2)).setRequiresGradientSync('false' as never)).toThrow(
    'setRequiresGradientSync: flag must be a boolean, got "false"',
  );
  // null is what newGroup gives a rank outside the group: it was taken for the world
  expect(() => fullyShard(new Linear(3, 2), { processGroup: null })).toThrow(/fullyShard: processGroup is null/);
});

// probe X: eval() before the forward was awaited: the module read its mode after the gathers
it('eval() or a fed loss before the forward is awaited: refused, typed', async () => {
  const model = new Sequential(new Linear(3, 2), new Dropout(0.5));
  const root = fullyShard(model);
  const x = randn([4, 3], { seed: 1 });
  const pending = root.forward(x);
  expect(() => model.eval()).toThrow(/Sequential\.eval\(\) while fullyShard's forward still runs \(not awaited\)/);
  expect(() => mse(pending as never, x)).toThrow(/mse: argument 0 is a Promise/); // was: an untyped TypeError
  (await pending).dispose();
  model.eval();
});

// probe AB: the summon wrote its gathered (pre-step) values back into the shards: the step taken meanwhile was undone
it('a step while summonFullParams still runs (not awaited): refused; awaited, the step stays', async () => {
  const root = fullyShard(new Linear(3, 2));
  const opt = new SGD(root.parameters(), { lr: 0.1 });
  for (const p of root.parameters()) p.grad = tf.onesLike(p.data);
  const summoning = root.summonFullParams(() => undefined);
  expect(() => opt.step()).toThrow(/still being written by a running summonFullParams\(\) \(not awaited\)/);
  await summoning;
  const before = root.parameters().map((p) => Array.from(p.data.dataSync()));
  opt.step();
  await root.summonFullParams(() => undefined);
  const moved = root.parameters().flatMap((p, i) => Array.from(p.data.dataSync(), (v, j) => before[i][j] - v));
  for (const d of moved) expect(d).toBeCloseTo(0.1, 6);
});

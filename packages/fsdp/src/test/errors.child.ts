// Misuses of fullyShard on every rank; prints RESULT with each error's name and message.

import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Tensor, tensor } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Linear, Module, Parameter, Sequential, SGD, Tanh } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { fromRank0 } from '@ddp/zero';
import { fullyShard, loadFSDPCheckpoint, saveFSDPCheckpoint } from '../index.js';
import { unevenMlp } from './model.js';

const group = await initProcessGroup({ timeoutMs: 30_000 });
const errors: Record<string, string> = {};
const attempt = async (what: string, fn: () => unknown) => {
  try {
    await fn();
    errors[what] = 'no error';
  } catch (e) {
    errors[what] = `${(e as Error).name}: ${(e as Error).message}`;
  }
};

const model = unevenMlp();
fullyShard(model.at(0));
const root = fullyShard(model);
const x = tensor(new Float32Array(12), [2, 6]);
await attempt('forward without the root', () => model.forward(x));
await attempt('sharded twice', () => fullyShard(model.at(0)));
await attempt('a commDtype from a config', () => fullyShard(new Linear(3, 1), { commDtype: 'float32' as 'float16' }));
const topDown = new Sequential(new Linear(3, 3), new Tanh());
fullyShard(topDown);
await attempt('inner unit after its parent', () => fullyShard(topDown.at(0)));
await attempt('load from an empty directory', async () =>
  loadFSDPCheckpoint(await mkdtemp(join(tmpdir(), 'fsdp-empty-')), { root }),
);
/** A module whose forward awaits (as tensor-parallel layers' do, for their collectives). */
class AsyncForward extends Module {
  readonly inner = this.registerModule('inner', new Linear(6, 2));
  async forward(h: Tensor): Promise<Tensor> {
    return this.inner.forward(h);
  }
}
const withAsync = new Sequential(new AsyncForward() as never);
fullyShard(withAsync.at(0));
const asyncRoot = fullyShard(withAsync);
await attempt('a unit with an async forward', () => asyncRoot.forward(x));
/** The trainable set changed after fullyShard: `before` runs on the model before it, `after` after it. */
type Change = (model: Sequential) => unknown;
const changedAfterSharding = (what: string, before: Change, after: Change) => {
  const model = new Sequential(new Linear(6, 3), new Tanh(), new Linear(3, 2));
  before(model);
  const sharded = fullyShard(model);
  after(model);
  return attempt(what, () => sharded.forward(x));
};
const requireGrad = (flag: boolean) => (model: Sequential) => {
  for (const p of model.at(0).parameters()) p.requiresGrad = flag;
};
await changedAfterSharding('unfrozen after fullyShard', requireGrad(false), requireGrad(true));
await changedAfterSharding('frozen after fullyShard', requireGrad(true), requireGrad(false));
await changedAfterSharding('layer replaced after fullyShard', requireGrad(true), (m) =>
  m.replaceModule('0', new Linear(6, 3)),
);
await changedAfterSharding('parameter added after fullyShard', requireGrad(true), (m) =>
  m.at(2).registerParameter('scale', new Parameter(tf.ones([2]))),
);
// one Linear under two parents, only the first a unit: the other reaches it from outside the unit
const shared = new Linear(6, 6);
const parents = new Sequential(new Sequential(shared), new Sequential(shared), new Linear(6, 2));
fullyShard(parents.at(0));
await attempt('a module shared by a unit and a parent outside it', () => fullyShard(parents));
// each rank resolved another newest entry (a save committed between their loads): refused at the next forward
const mixed = fullyShard(new Sequential(new Linear(6, 3), new Tanh(), new Linear(3, 2)));
const base = await fromRank0(group, group.rank === 0 ? await mkdtemp(join(tmpdir(), 'fsdp-mixed-')) : '');
await attempt('a save without its optimizer', () => saveFSDPCheckpoint(base, { root: mixed, step: 1 } as never));
const optimizer = new SGD(mixed.parameters(), { lr: 0.1 });
await saveFSDPCheckpoint(join(base, 'a'), { root: mixed, optimizer, step: 1 });
await saveFSDPCheckpoint(join(base, 'b'), { root: mixed, optimizer, step: 2 });
await loadFSDPCheckpoint(join(base, group.rank === 0 ? 'a' : 'b'), { root: mixed, optimizer });
await attempt('ranks loaded different entries', () => mixed.forward(x));
console.log(`RESULT ${JSON.stringify({ rank: group.rank, errors })}`);
await destroyProcessGroup();

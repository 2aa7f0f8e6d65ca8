// Misuses of fullyShard on every rank; prints RESULT with each error's name and message.

import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Tensor, tensor } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Linear, Module, Sequential, Tanh } from '@ddp/nn';
import { fullyShard, loadFSDPCheckpoint } from '../index.js';
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
console.log(`RESULT ${JSON.stringify({ rank: group.rank, errors })}`);
await destroyProcessGroup();

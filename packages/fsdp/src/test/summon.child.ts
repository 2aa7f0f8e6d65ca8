// fullyShard edges (2 ranks): weights tied across a unit boundary, summonFullParams with a state
// dict loaded inside it and with commDtype, a Sequential child returning its input. Prints RESULT.
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { matmul, type Tensor, tensor } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Linear, Module, manualSeed, mse, type Parameter, Sequential, SGD, Tanh } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { fullyShard, loadFSDPCheckpoint, saveFSDPCheckpoint } from '../index.js';

const group = await initProcessGroup({ timeoutMs: 30_000 });
const result: Record<string, unknown> = { rank: group.rank };

/** A head multiplying by a weight it is given (another layer's: GPT's tied LM head). */
class Head extends Module {
  constructor(readonly w: Parameter) {
    super();
    this.registerParameter('weight', w);
  }
  forward(x: Tensor): Tensor {
    return matmul(x, this.w, { transposeB: true });
  }
}
class Tied extends Module {
  readonly emb = this.registerModule('emb', new Linear(6, 6, { bias: false }));
  readonly head = this.registerModule('head', new Head(this.emb.weight));
  forward(x: Tensor): Tensor {
    return this.head.forward(this.emb.forward(x).tanh());
  }
}
manualSeed(1);
const tied = new Tied();
fullyShard(tied.head);
try {
  fullyShard(tied);
  result.tied = 'no error';
} catch (e) {
  result.tied = `${(e as Error).name}: ${(e as Error).message}`;
}

// the same tie between two sibling units (was: "belong to an enclosing unit already; apply it bottom-up")
const siblings = new Tied();
fullyShard(siblings.emb);
try {
  fullyShard(siblings.head);
  result.tiedSiblings = 'no error';
} catch (e) {
  result.tiedSiblings = `${(e as Error).name}: ${(e as Error).message}`;
}

// a state dict loaded while the parameters are gathered reaches the shards
const lin = new Linear(3, 2);
const root = fullyShard(lin);
await root.summonFullParams(() => lin.loadStateDict({ weight: tf.ones([2, 3]), bias: tf.fill([2], 2) }));
result.loaded = await root.summonFullParams(() => [...lin.weight.data.dataSync(), ...lin.bias!.data.dataSync()]);

// models initialised per rank, then the same state on every rank (written in summonFullParams, or a
// checkpoint loaded): they train (were refused at the first forward); a state written per rank is refused
const perRank = (seed: number) => {
  manualSeed(seed + group.rank);
  const m = new Linear(3, 2);
  return { m, r: fullyShard(m) };
};
const firstForward = (r: ReturnType<typeof perRank>['r']) =>
  r.forward(tensor([1, 2, 3], [1, 3])).then(
    () => 'ran',
    (e: Error) => `${e.name}: ${e.message}`,
  );
const same = perRank(100);
await same.r.summonFullParams(() => same.m.loadStateDict({ weight: tf.fill([2, 3], 0.5), bias: tf.zeros([2]) }));
result.sameWritten = await firstForward(same.r);
const dir = join(tmpdir(), `fsdp-summon-${process.env.MASTER_PORT}`);
await saveFSDPCheckpoint(dir, { root: same.r, optimizer: new SGD(same.r.parameters(), { lr: 0.1 }), step: 1 });
const loaded = perRank(200);
await loadFSDPCheckpoint(dir, { root: loaded.r });
result.checkpointLoaded = await firstForward(loaded.r);
await group.barrier().wait();
if (group.rank === 0) rmSync(dir, { recursive: true, force: true });
const apart = perRank(300);
await apart.r.summonFullParams(() =>
  apart.m.loadStateDict({ weight: tf.fill([2, 3], group.rank), bias: tf.zeros([2]) }),
);
result.writtenApart = await firstForward(apart.r);

// with 2-byte communication, summonFullParams still reads the float32 values the shards hold
const half = new Linear(3, 1);
half.weight.data = tf.tensor2d([[1.001, 2.003, 3.007]]);
half.bias!.data = tf.tensor1d([0.123456]);
const halfRoot = fullyShard(half, { commDtype: 'bfloat16' });
result.summoned = await halfRoot.summonFullParams(() => [
  ...half.weight.data.dataSync(),
  ...half.bias!.data.dataSync(),
]);

// a Sequential root whose middle child returns its input: 2 SGD steps, the loss per step
class Identity extends Module {
  forward(x: Tensor): Tensor {
    return x;
  }
}
manualSeed(2);
const seq = new Sequential(new Linear(6, 7), new Tanh(), new Identity(), new Linear(7, 5));
const reference = new Sequential(new Linear(6, 7), new Tanh(), new Identity(), new Linear(7, 5));
reference.loadStateDict(seq.stateDict());
fullyShard(seq.at(0));
fullyShard(seq.at(3));
const seqRoot = fullyShard(seq, { reshardAfterForward: false });
const opt = new SGD(seqRoot.parameters(), { lr: 0.1 });
const x = tensor(
  Array.from({ length: 24 }, (_, i) => Math.sin(i)),
  [4, 6],
);
const y = tensor(
  Array.from({ length: 20 }, (_, i) => Math.cos(i)),
  [4, 5],
);
const refOpt = new SGD(reference.parameters(), { lr: 0.1 });
const losses: number[] = [];
const referenceLosses: number[] = [];
for (let step = 0; step < 2; step++) {
  const l = mse(await seqRoot.forward(x), y);
  await l.backward();
  losses.push(l.item());
  opt.step();
  opt.zeroGrad();
  const r = mse(reference.forward(x), y);
  await r.backward();
  referenceLosses.push(r.item());
  refOpt.step();
  refOpt.zeroGrad();
}
result.referenceLosses = referenceLosses;
result.losses = losses;
console.log(`RESULT ${JSON.stringify(result)}`);
await destroyProcessGroup();

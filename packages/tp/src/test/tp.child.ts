// One rank of the tensor-parallel test (tp = world size): the unsharded model runs beside the
// sharded one in this process, from the same seed; prints the largest differences.
//   node tp.child.ts <tp> [clip]   clip: SGD steps after clipping the gradients' norm (the sharded
//   model's over the tp group), and whether clipGradNorm refuses the sharded gradients

import { crossEntropy, noGrad, randn, type Tensor } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup, ProcessGroupManager } from '@ddp/comm';
import { AdamW, clipGradNorm, clipGradNormDistributed, Embedding, Generator, Linear, type Module, SGD } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { applyTensorParallel, ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding } from '../index.js';
import { TinyGpt } from './tiny-gpt.js';

const world = await initProcessGroup({ timeoutMs: 30_000 });
const grid = await ProcessGroupManager.create({ tp: Number(process.argv[2] ?? world.size) });
const group = grid.tpGroup;

const maxDiff = (a: tf.Tensor, b: tf.Tensor) => tf.tidy(() => tf.max(tf.abs(tf.sub(a, b))).dataSync()[0]);

/** Column (gathered) and row (split input) layers against the plain Linear: output, dx, weight grads. */
async function layerDiffs(): Promise<Record<string, number>> {
  const lin = new Linear(6, 8, { generator: new Generator(3) });
  const out: Record<string, number> = {};
  for (const [name, make] of [
    ['column', () => ColumnParallelLinear.fromLinear(lin, group, { gatherOutput: true })],
    ['row', () => RowParallelLinear.fromLinear(lin, group, { inputIsParallel: false })],
  ] as const) {
    const layer: Module & { forward(x: Tensor): Promise<Tensor>; weight: Tensor } = make();
    const x = randn([3, 6], { seed: 11, requiresGrad: true });
    const dy = tf.randomNormal([3, 8], 0, 1, 'float32', 12);
    const want = lin.forward(x);
    await want.backward(dy);
    const wantDx = tf.clone(x.grad!);
    x.grad = null;
    const got = await layer.forward(x);
    await got.backward(dy);
    const wantW = applyShard(lin.weight.grad!, name === 'column' ? 0 : 1);
    out[`${name} y`] = maxDiff(got.data, want.data);
    out[`${name} dx`] = maxDiff(x.grad!, wantDx);
    out[`${name} dweight`] = maxDiff(layer.weight.grad!, wantW);
    tf.dispose([wantDx, wantW, dy]);
    lin.zeroGrad();
    layer.dispose();
    x.dispose();
  }
  // the padding row (torch's padding_idx) gets no gradient on its owner, every id embeds as in nn's Embedding;
  // before, the sharded layer dropped paddingIdx and the row trained (one SGD step moved it to [-3, -3, -3])
  for (const paddingIdx of [0, 13]) {
    const table = new Embedding(16, 3, { paddingIdx, generator: new Generator(2) });
    const layer = VocabParallelEmbedding.fromEmbedding(table, group);
    const ids = [
      [0, 1, 13, 0],
      [2, 13, 15, 9],
    ];
    const dy = tf.randomNormal([2, 4, 3], 0, 1, 'float32', 5);
    const want = table.forward(ids);
    await want.backward(dy);
    const got = await layer.forward(ids);
    await got.backward(dy);
    const wantW = applyShard(table.weight.grad!, 0);
    out[`embedding paddingIdx ${paddingIdx} y`] = maxDiff(got.data, want.data);
    out[`embedding paddingIdx ${paddingIdx} dweight`] = maxDiff(layer.weight.grad!, wantW);
    tf.dispose([wantW, dy]);
    table.dispose();
    layer.dispose();
  }
  return out;
}

function applyShard(t: tf.Tensor, dim: number): tf.Tensor {
  const part = t.shape[dim] / group.size;
  return tf.slice(
    t,
    t.shape.map((_, i) => (i === dim ? group.rank * part : 0)),
    t.shape.map((d, i) => (i === dim ? part : d)),
  );
}

const config = { vocab: 16, seq: 6, dim: 16, heads: 4, layers: 2 };
const ids = [0, 1, 2].map((b) => [...Array(config.seq).keys()].map((t) => (b * 5 + t * 3) % config.vocab));
const targets = ids.flatMap((row) => row.map((v) => (v + 1) % config.vocab));
const reference = new TinyGpt(config, new Generator(7));
const sharded = new TinyGpt(config, new Generator(7));
applyTensorParallel(sharded, group);

const clipping = process.argv[3] === 'clip';
/** Gradient norms before clipping (clip mode), the reference's then the sharded model's. */
const norms: number[] = [];
/** What clipGradNorm said of the sharded gradients (this rank's norm alone would clip each rank differently). */
let refused: string | null = null;
const MAX_NORM = 0.05; // below the norm of the first step's gradients, so clipping scales them

async function step(model: TinyGpt, opt: AdamW | SGD): Promise<tf.Tensor> {
  const logits = await model.forward(ids);
  const loss = crossEntropy(logits.reshape([ids.length * config.seq, config.vocab]), targets);
  const kept = tf.clone(logits.data);
  await loss.backward();
  loss.dispose();
  logits.dispose();
  if (clipping && model === reference) norms.push(clipGradNorm(model.parameters(), MAX_NORM));
  if (clipping && model === sharded) {
    try {
      clipGradNorm(model.parameters(), MAX_NORM);
    } catch (error) {
      refused ??= `${(error as Error).name}: ${(error as Error).message}`;
    }
    norms.push(await clipGradNormDistributed(model.parameters(), MAX_NORM, { groups: [group] }));
  }
  opt.step();
  opt.zeroGrad();
  return kept;
}

// eps 1e-6 rather than 1e-8: the k-projection bias has an exactly zero gradient (softmax ignores a
// shift of every score), so both runs hold only rounding noise there, which Adam with a tiny eps
// would blow up to a step of ±lr.
// Clipping scales every gradient alike, which Adam's step hardly sees: SGD's shows it.
const adam = (m: TinyGpt) =>
  clipping
    ? new SGD(m.parameters(), { lr: 0.5 })
    : new AdamW(m.parameters(), { lr: 1e-3, weightDecay: 0.01, eps: 1e-6 });
const refOpt = adam(reference);
const tpOpt = adam(sharded);
const refLogits = await step(reference, refOpt);
const tpLogits = await step(sharded, tpOpt);
const logits = maxDiff(refLogits, tpLogits);

// Shard the stepped reference the same way and compare every parameter.
applyTensorParallel(reference, group);
const refState = reference.stateDict();
let weights = 0;
const worst: string[] = [];
for (const [name, t] of sharded.stateDict()) {
  const d = maxDiff(t, refState.get(name)!);
  if (d > 1e-6) worst.push(`${name}: ${d}`);
  weights = Math.max(weights, d);
}

// Memory: a further step must leave the tensor count unchanged.
tf.dispose(await step(sharded, tpOpt));
const before = tf.memory().numTensors;
tf.dispose(await step(sharded, tpOpt));
const leaked = tf.memory().numTensors - before;
// Evaluation: a forward under noGrad, and one with grad never backwarded, leave nothing either (the layers'
// partial outputs kept their data, and the graph with them: 31 and 64 tensors per block and forward)
const evaluate = async () => (await sharded.forward(ids)).dispose();
await noGrad(evaluate);
const beforeEval = tf.memory().numTensors;
await noGrad(evaluate);
await evaluate();
const evalLeaked = tf.memory().numTensors - beforeEval;

const result = {
  logits,
  weights,
  worst,
  leaked,
  evalLeaked,
  layers: await layerDiffs(),
  dpRank: grid.dpRank,
  tpRank: grid.tpRank,
  norms: norms.slice(0, 2),
  refused,
};
console.log(`RESULT ${JSON.stringify(result)}`);
await destroyProcessGroup();

// One world of fsdp.multiprocess.test.ts: runs each case of argv[2] (JSON) in turn, training a
// model with fullyShard units and, beside it, the same model on the whole global batch in this
// process. Prints one RESULT line: an array, one entry per case.
import { createHash } from 'node:crypto';
import { checkpoint, type Tensor, tidy } from '@ddp/autograd';
import {
  destroyProcessGroup,
  type HalfDtype,
  initProcessGroup,
  type ProcessGroup,
  ProcessGroupManager,
} from '@ddp/comm';
import { Adam, AdamW, type Module, mse, type Optimizer, type Sequential, SGD } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { gradientRegions } from '../flat-shard.js';
import { hostBuffers as pool } from '../host-collectives.js';
import { type FSDPModule, fullyShard } from '../index.js';
import {
  batch,
  flatValues,
  goldenBatch,
  goldenMlp,
  loadGolden,
  MLP_KEYS,
  TwoBlockTransformer,
  unevenMlp,
} from './model.js';

export interface Case {
  model: 'golden' | 'uneven' | 'transformer';
  steps: number;
  reshardAfterForward?: boolean;
  prefetch?: boolean;
  /** two micro-batches per step, the first without gradient sync */
  accumulate?: boolean;
  commDtype?: HalfDtype;
  /**
   * A dp × tp grid of the world (ProcessGroupManager, tp fastest): FSDP over the dp group; each
   * tp coordinate trains its own replica on its own data (step t + 100·tpRank), all at once.
   */
  tp?: number;
  /** each transformer block's forward under activation checkpointing, inside its unit */
  checkpoint?: boolean;
  /** with accumulate: the synced micro-batch skips block1, which the first one trained */
  skipInSync?: boolean;
  /** AdamW, weight decay on the matrices only: one group per kind of parameter, across the units */
  decayGroups?: boolean;
  /** transformer: rank 0 runs block1, the other ranks skip it */
  block1OnRank0?: boolean;
  /** transformer: rank 0's loss uses the side head, the other ranks' do not (without it, no rank's does) */
  sideOnRank0?: boolean;
}

const maxDiff = (a: number[], b: number[]) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
const WIDTHS = { golden: [5, 3], uneven: [6, 5], transformer: [6, 5] } as const;

function build(c: Case): Module {
  return c.model === 'golden'
    ? goldenMlp(loadGolden())
    : c.model === 'uneven'
      ? unevenMlp()
      : new TwoBlockTransformer();
}

/** What the inner units' forwards saw: how often they ran, and their gathered parameters' storage. */
interface UnitProbe {
  forwards: number;
  storage: object[];
}

/** Wraps a unit's forward (before fullyShard takes it) to count its runs and note its parameters' storage. */
function probe(m: Module, seen: UnitProbe, c: Case): Module {
  const inner = m.forward.bind(m) as (x: Tensor) => Tensor;
  const run = c.checkpoint ? (x: Tensor) => checkpoint(inner, x) : inner;
  m.forward = (x: Tensor) => {
    seen.forwards++;
    for (const p of m.parameters()) if (p.requiresGrad) seen.storage.push(p.data.dataId);
    return run(x);
  };
  return m;
}

function shard(c: Case, model: Module, group: ProcessGroup, seen: UnitProbe): { root: FSDPModule; units: number } {
  const opts = {
    processGroup: group,
    reshardAfterForward: c.reshardAfterForward,
    prefetch: c.prefetch,
    commDtype: c.commDtype,
  };
  const units = model instanceof TwoBlockTransformer ? model.blocks : [0, 2].map((i) => (model as Sequential).at(i));
  for (const u of units) fullyShard(probe(u, seen, c), opts);
  return { root: fullyShard(model, opts), units: units.length };
}

/** How many of the storages noted by `probe` the backend still holds. */
function stillHeld(storage: object[]): number {
  const backend = tf.engine().backend as unknown as { dataIdMap: { has(id: object): boolean } };
  return storage.filter((id) => backend.dataIdMap.has(id)).length;
}

const makeOptimizer = (c: Case, params: Tensor[]): Optimizer<{ lr: number }> =>
  c.model === 'golden' ? new SGD(params, { lr: 0.1 }) : new Adam(params, { lr: 0.01 });

/**
 * AdamW with weight decay on the matrices only (biases and norms without, as OpenCLIP trains), the
 * groups picked by each parameter's shape, which a resharded parameter still reports: `of` maps a
 * model parameter to what the optimizer steps (FSDPModule.shardOf).
 */
function decayGroups(model: Module, of: (p: Tensor) => Tensor | undefined): Optimizer<{ lr: number }> {
  const trained = model.namedParameters().filter(([, p]) => p.requiresGrad);
  const pick = (decay: boolean) =>
    trained.filter(([, p]) => p.shape.length > 1 === decay && of(p)).map(([, p]) => of(p)!);
  return new AdamW(
    [
      { params: pick(true), weightDecay: 0.5 },
      { params: pick(false), weightDecay: 0 },
    ],
    { lr: 0.01 },
  );
}

async function backwardOn(
  forward: (x: Tensor) => Promise<Tensor>,
  c: Case,
  t: number,
  from: number,
  to: number,
  scale: number,
  afterForward: () => void = () => {},
): Promise<void> {
  const [w, o] = WIDTHS[c.model];
  const { x, y } =
    c.model === 'golden' ? goldenBatch(t, from, to) : batch(t, w, o, c.model === 'transformer', from, to);
  const out = await forward(x);
  afterForward();
  const loss = tidy(() => mse(out, y).mul(scale));
  out.dispose();
  x.dispose();
  y.dispose();
  await loss.backward();
  loss.dispose();
}

/**
 * The reduce-scatters' regions over the case, against what each step should take: every gradient that
 * fills its region (a size dividing by N) reduced in its own storage, the others copied (padded), and
 * zeros for a parameter without one. Only where the ranks agree on which parameters get one.
 */
function reduceScatterRegions(c: Case, model: Module, n: number, before: typeof gradientRegions) {
  const regions = { inPlace: gradientRegions.inPlace - before.inPlace, copied: gradientRegions.copied - before.copied };
  if (c.commDtype || c.skipInSync || c.block1OnRank0 || c.sideOnRank0 || n === 1) return { regions };
  // the transformer's side head gets no gradient here: zeros stand in, a copy
  const unused = model instanceof TwoBlockTransformer ? model.side.parameters() : [];
  const sizes = model
    .parameters()
    .filter((p) => p.requiresGrad)
    .map((p) => (unused.includes(p) ? -1 : p.size));
  const even = sizes.filter((s) => s >= 0 && s % n === 0).length;
  return { regions, expectedRegions: { inPlace: c.steps * even, copied: c.steps * (sizes.length - even) } };
}

async function runCase(c: Case, world: ProcessGroup): Promise<Record<string, unknown>> {
  const grid = c.tp ? await ProcessGroupManager.create({ tp: c.tp }) : null;
  const group = grid?.dpGroup ?? world;
  const { rank, size } = group;
  const shift = 100 * (grid?.tpRank ?? 0);
  const model = build(c);
  const seen: UnitProbe = { forwards: 0, storage: [] };
  const { root, units } = shard(c, model, group, seen);
  // between forward and backward: how many gathered parameters' storages the graph keeps alive
  let heldAfterForward = 0;
  const afterForward = () => {
    heldAfterForward = Math.max(heldAfterForward, stillHeld(seen.storage));
    seen.storage = [];
  };
  const opt = c.decayGroups ? decayGroups(model, (p) => root.shardOf(p)) : makeOptimizer(c, root.parameters());
  const ref = build(c);
  const refOpt = c.decayGroups ? decayGroups(ref, (p) => p) : makeOptimizer(c, ref.parameters());
  const [from, to] = [(rank * 12) / size, ((rank + 1) * 12) / size];
  if (c.sideOnRank0) (model as TwoBlockTransformer).useSide = rank === 0;
  if (c.block1OnRank0) (model as TwoBlockTransformer).skipBlock1 = rank !== 0;
  let tensorsAfterFirst = 0;
  // host buffers FSDP's own steps took (gathers and reduce-scatters on the wasm heap take none)
  let hostBuffers = 0;
  const regionsBefore = { ...gradientRegions };
  for (let t = 0; t < c.steps; t++) {
    const before = pool.taken;
    if (c.accumulate) {
      const mid = (from + to) / 2;
      root.setRequiresGradientSync(false);
      await backwardOn((x) => root.forward(x), c, t + shift, from, mid, 0.5, afterForward);
      root.setRequiresGradientSync(true);
      if (c.skipInSync) (model as TwoBlockTransformer).skipBlock1 = true;
      await backwardOn((x) => root.forward(x), c, t + shift, mid, to, 0.5, afterForward);
      if (c.skipInSync) (model as TwoBlockTransformer).skipBlock1 = false;
    } else {
      await backwardOn((x) => root.forward(x), c, t + shift, from, to, 1, afterForward);
    }
    opt.step();
    opt.zeroGrad();
    hostBuffers += pool.taken - before;
    const refForward = async (x: Tensor) => tidy(() => ref.forward(x as never) as Tensor);
    if (c.skipInSync) {
      // every rank's two micro-batches, the second without block1: Σ_r (½ loss(first) + ½ loss(second)) / N
      for (let r = 0; r < size; r++) {
        const [lo, hi] = [(r * 12) / size, ((r + 1) * 12) / size];
        await backwardOn(refForward, c, t + shift, lo, (lo + hi) / 2, 0.5 / size);
        (ref as TwoBlockTransformer).skipBlock1 = true;
        await backwardOn(refForward, c, t + shift, (lo + hi) / 2, hi, 0.5 / size);
        (ref as TwoBlockTransformer).skipBlock1 = false;
      }
    } else if (c.sideOnRank0 || c.block1OnRank0) {
      // rank 0's rows through the side head (or block1), the others' not: Σ_r loss_r / N
      for (let r = 0; r < size; r++) {
        (ref as TwoBlockTransformer).useSide = c.sideOnRank0 === true && r === 0;
        (ref as TwoBlockTransformer).skipBlock1 = c.block1OnRank0 === true && r !== 0;
        await backwardOn(refForward, c, t + shift, (r * 12) / size, ((r + 1) * 12) / size, 1 / size);
      }
    } else await backwardOn(refForward, c, t + shift, 0, 12, 1);
    refOpt.step();
    refOpt.zeroGrad();
    if (t === 0) tensorsAfterFirst = tf.memory().numTensors;
  }
  const result: Record<string, unknown> = {
    rank: world.rank,
    replica: grid?.tpRank ?? 0,
    tensorGrowth: tf.memory().numTensors - tensorsAfterFirst,
    forwardsPerUnit: seen.forwards / (units * c.steps * (c.accumulate ? 2 : 1)),
    heldAfterForward,
    hostBuffers,
    ...reduceScatterRegions(c, model, size, regionsBefore),
  };
  if (model instanceof TwoBlockTransformer) {
    // a root that is not a Sequential shards only what no inner unit holds: inProj, norm, head
    const own = [model.inProj, model.norm, model.head, model.side]
      .flatMap((m) => m.parameters())
      .filter((p) => p.requiresGrad);
    const held = new Set(root.flat?.params);
    result.rootHoldsOnlyItsOwn = held.size === own.length && own.every((p) => held.has(p));
  }
  const params = await root.summonFullParams(() => flatValues(model.parameters()));
  result.maxDiff = maxDiff(params, flatValues(ref.parameters()));
  result.hash = createHash('sha256').update(Float32Array.from(params)).digest('hex').slice(0, 16);
  if (c.model === 'golden') {
    const after = loadGolden().outputs.weights_after_step[c.steps - 1];
    result.goldenDiff = maxDiff(
      params,
      Object.keys(MLP_KEYS).flatMap((k) => after[k as keyof typeof MLP_KEYS].data),
    );
  }
  opt.dispose();
  refOpt.dispose();
  return result;
}

const cases = JSON.parse(process.argv[2] ?? '[]') as Case[];
const group = await initProcessGroup({ timeoutMs: 30_000 });
const results = [];
for (const c of cases) results.push(await runCase(c, group));
console.log(`RESULT ${JSON.stringify(results)}`);
await destroyProcessGroup();

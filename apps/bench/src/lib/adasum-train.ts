/**
 * One rank of `pnpm bench adasum`: the same small regression trained with each arm of the
 * comparison, at each single-worker learning rate. Each rank draws its own mini-batches; rank 0
 * prints the held-out loss after every step.
 */
import { mse, noGrad, type Tensor, tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup, type ProcessGroup } from '@ddp/comm';
import { Generator, Linear, Sequential, SGD, Tanh } from '@ddp/nn';
import { AdasumOptimizer, DistributedDataParallel } from '@ddp/reducer';
import { printSample } from './world.js';

export const [IN, HIDDEN, BATCH, EVAL] = [16, 32, 8, 256];
/** Heavy-ball momentum of the 'momentum' runs (the paper's Momentum-SGD). */
export const MOMENTUM = 0.9;
export const OPTIMIZERS = ['sgd', 'momentum'] as const;
/**
 * single: one worker alone (rank 0's batches), lr η — where η comes from.
 * average: DDP's mean of the gradients, lr η (no scaling).
 * average-scaled: the mean with the linear-scaling rule, lr N·η (Goyal et al.; the paper's baseline).
 * adasum: Horovod's Adasum optimizer, each rank's own step at lr η, the deltas combined.
 */
export const ARMS = ['single', 'average', 'average-scaled', 'adasum'] as const;

export interface LossSample {
  optimizer: (typeof OPTIMIZERS)[number];
  arm: (typeof ARMS)[number];
  /** The single-worker learning rate η (momentum runs use η / 10: the same long-run step). */
  lr: number;
  /** Which draw of the ranks' mini-batches (the model starts the same). */
  seed: number;
  step: number;
  loss: number;
}

const mlp = (seed: number) => {
  const generator = new Generator(seed);
  return new Sequential(new Linear(IN, HIDDEN, { generator }), new Tanh(), new Linear(HIDDEN, 1, { generator }));
};

/** x ~ N(0, 1) and the teacher network's output: the same function on every rank, each rank its own samples. */
function batchOf(teacher: Sequential, gen: Generator, n: number): { x: Tensor; y: Tensor } {
  const x = tensor(gen.normal(n * IN), [n, IN]);
  const y = noGrad(() => teacher.forward(x));
  return { x, y };
}

/** The model's forward and a step that ends the iteration, for one arm. */
async function armOf(arm: LossSample['arm'], model: Sequential, lr: number, momentum: number, group: ProcessGroup) {
  if (arm === 'adasum') {
    const opt = new AdasumOptimizer(new SGD(model.parameters(), { lr, momentum }), group);
    return {
      forward: (x: Tensor) => model.forward(x),
      step: async () => {
        await opt.step();
        opt.zeroGrad();
      },
    };
  }
  const ddp = arm === 'single' ? null : await DistributedDataParallel.create(model, { processGroup: group });
  const opt = new SGD(model.parameters(), { lr: arm === 'average-scaled' ? lr * group.size : lr, momentum });
  return {
    forward: (x: Tensor) => (ddp ? ddp.forward(x) : model.forward(x)),
    step: async () => {
      opt.step();
      opt.zeroGrad();
    },
  };
}

/** Every (lr, seed, arm) run, in the same order on every rank. */
const runsOf = (lrs: number[], seeds: number) =>
  lrs.flatMap((lr) => [...Array(seeds).keys()].flatMap((seed) => ARMS.map((arm) => ({ lr, seed, arm }))));

export async function trainRank(steps: number, lrs: number[], seeds: number): Promise<void> {
  const group = await initProcessGroup({ timeoutMs: 120_000 });
  const teacher = mlp(99);
  const held = batchOf(teacher, new Generator(1234), EVAL);
  for (const optimizer of OPTIMIZERS) {
    const momentum = optimizer === 'momentum' ? MOMENTUM : 0;
    for (const { lr, seed, arm } of runsOf(lrs, seeds)) {
      if (arm === 'single' && group.rank !== 0) continue;
      const model = mlp(7); // the same start on every rank
      const { forward, step } = await armOf(arm, model, momentum ? lr / 10 : lr, momentum, group);
      const gen = new Generator(500 + group.rank + 1000 * seed);
      for (let s = 0; s <= steps; s++) {
        const loss = noGrad(() => tidy(() => mse(model.forward(held.x), held.y).item()));
        if (group.rank === 0) printSample({ optimizer, arm, lr, seed, step: s, loss } satisfies LossSample);
        if (s === steps || !Number.isFinite(loss)) break;
        const { x, y } = batchOf(teacher, gen, BATCH);
        const l = tidy(() => mse(forward(x), y));
        await l.backward();
        for (const t of [x, y, l]) t.dispose();
        await step();
      }
      model.dispose();
    }
  }
  await destroyProcessGroup();
}

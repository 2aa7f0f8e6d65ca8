// Test-only: several DDP models on one process group (rank.child.ts).

import { tidy } from '@ddp/autograd';
import { newGroup, type ProcessGroup } from '@ddp/comm';
import { BatchNorm1d, Generator, Linear, mse, Sequential, SGD, Tanh } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { DistributedDataParallel } from '../index.js';
import { normal, rows } from './models.js';

type Scenario = (pg: ProcessGroup) => Promise<Record<string, unknown>>;

/** Two like models (a BatchNorm's buffers broadcast after each backward), so a mix-up shows as values only. */
const model = (seed: number) => {
  const gen = new Generator(seed);
  return new Sequential(
    new Linear(5, 8, { generator: gen }),
    new BatchNorm1d(8),
    new Tanh(),
    new Linear(8, 3, { generator: gen }),
  );
};

/**
 * Two DDP models on one group trained 4 steps, each rank on its own rows, their backwards run one after
 * the other (the reference), at once (`Promise.all`, a JavaScript habit), and in another order on each
 * rank. Each model's gradients and buffers must come from the same model on the other ranks (was: at
 * once, the end-of-backward collectives interleaved by timing, a CollectiveMismatchError or one model's
 * buffers in the other; in another order, model A averaged with B, silently; probe BO). In another
 * order each rank now waits for the other's model: a typed error at the group's timeout (2 s here).
 */
async function twoModels(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const x = normal([4 * pg.size, 5], 101);
  const y = normal([4 * pg.size, 3], 102);
  const out: Record<string, unknown> = {};
  for (const order of ['sequential', 'concurrent', 'reversed'] as const) {
    const [a, b] = [model(103), model(104)];
    const processGroup = (await newGroup([...pg.ranks], { timeoutMs: order === 'reversed' ? 2000 : 30_000 }))!;
    const ddpA = await DistributedDataParallel.create(a, { processGroup });
    const ddpB = await DistributedDataParallel.create(b, { processGroup });
    const opt = new SGD([...a.parameters(), ...b.parameters()], { lr: 0.1 });
    for (let step = 0; step < 4; step++) {
      const from = 4 * pg.rank;
      const la = tidy(() => mse(ddpA.forward(rows(x, from, from + 4)), rows(y, from, from + 4)));
      const lb = tidy(() => mse(ddpB.forward(rows(x, from, from + 4)).mul(2), rows(y, from, from + 4)));
      try {
        if (order === 'concurrent') await Promise.all([la.backward(), lb.backward()]);
        else for (const loss of order === 'reversed' && pg.rank === 1 ? [lb, la] : [la, lb]) await loss.backward();
      } catch (e) {
        out[order] = `${(e as Error).name}: ${(e as Error).message}`;
        break;
      } finally {
        la.dispose();
        lb.dispose();
      }
      opt.step();
      opt.zeroGrad();
    }
    const state = (m: Sequential) => Object.fromEntries([...m.stateDict()].map(([k, t]) => [k, [...t.dataSync()]]));
    out[order] ??= { a: state(a), b: state(b) };
    for (const d of [ddpA, ddpB]) d.dispose();
    for (const m of [a, b]) m.dispose();
  }
  tf.dispose([x, y]);
  return out;
}

export const modelScenarios: Record<string, Scenario> = { twoModels };

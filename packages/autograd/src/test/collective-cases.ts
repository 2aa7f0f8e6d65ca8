// Test-only: the same differentiable-collective computations, run by the in-process fake
// group (collectives.test.ts) and by real rank processes (collectives.child.ts).
import type { ProcessGroup } from '@ddp/comm';
import { allGather, allReduce, broadcast, concat, mul, reduceScatter, sum, type Tensor, tensor } from '../index.js';

/** Deterministic per-rank values. */
const values = (n: number, rank: number, salt: number): number[] =>
  [...Array(n).keys()].map((i) => Math.sin(1 + i * 0.7 + rank * 1.3 + salt));

interface Case {
  xShape: (worldSize: number) => number[];
  /** This rank's output from its input, through the collective. */
  run: (x: Tensor, g: ProcessGroup) => Promise<Tensor>;
  /** The same output computed in one process from every rank's input. */
  reference: (xs: Tensor[], rank: number) => Tensor;
}

const addAll = (xs: Tensor[]) => xs.reduce((a, b) => a.add(b));
const chunk = (x: Tensor, r: number) => x.narrow(0, 2 * r, 2);

/** Each case maps a rank's input to an output; that rank's loss is sum(output * weights). */
export const cases: Record<string, Case> = {
  allReduceSum: { xShape: () => [2, 3], run: (x, g) => allReduce(x, g), reference: (xs) => addAll(xs) },
  allReduceAvg: {
    xShape: () => [4],
    run: (x, g) => allReduce(x, g, { op: 'avg' }),
    reference: (xs) => addAll(xs).div(xs.length),
  },
  allGather: {
    xShape: () => [2, 2],
    run: async (x, g) => {
      const parts = await allGather(x, g);
      const y = concat(parts, 0);
      for (const p of parts) p.dispose();
      return y;
    },
    reference: (xs) => concat(xs, 0),
  },
  reduceScatterSum: {
    xShape: (size) => [2 * size, 3],
    run: (x, g) => reduceScatter(x, g),
    reference: (xs, r) => addAll(xs.map((x) => chunk(x, r))),
  },
  reduceScatterAvg: {
    xShape: (size) => [2 * size, 1],
    run: (x, g) => reduceScatter(x, g, { op: 'avg' }),
    reference: (xs, r) => addAll(xs.map((x) => chunk(x, r))).div(xs.length),
  },
  broadcast: { xShape: () => [3, 2], run: (x, g) => broadcast(x, g, { src: 1 }), reference: (xs) => xs[1].mul(1) },
};

/** Rank `rank`'s input of a case, as a leaf requiring grad. */
export function caseInput(c: Case, rank: number, worldSize: number): Tensor {
  const shape = c.xShape(worldSize);
  return tensor(
    values(
      shape.reduce((a, b) => a * b, 1),
      rank,
      0,
    ),
    shape,
    { requiresGrad: true },
  );
}

/** Rank `rank`'s loss weights for an output. */
export function caseWeights(y: Tensor, rank: number): Tensor {
  return tensor(values(y.size, rank, 5), y.shape);
}

/** Runs every case on this rank; returns the input gradients by case name. */
export async function runCases(group: ProcessGroup): Promise<Record<string, number[]>> {
  const grads: Record<string, number[]> = {};
  for (const [name, c] of Object.entries(cases)) {
    const x = caseInput(c, group.rank, group.size);
    const y = await c.run(x, group);
    const weights = caseWeights(y, group.rank);
    const loss = sum(mul(y, weights));
    await loss.backward();
    grads[name] = Array.from(x.grad!.dataSync());
    for (const t of [x, y, weights, loss]) t.dispose();
  }
  return grads;
}

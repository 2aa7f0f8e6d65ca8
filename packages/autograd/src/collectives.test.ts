import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { allGather, allReduce, broadcast, concat, mul, randn, reduceScatter, sum, type Tensor } from './index.js';
import { fakeWorld } from './fake-process-group.js';
import { disposeAll, expectAllClose } from './test-utils.js';

const N = 3;
type Setup = { xShape: number[]; cShape: number[] };

/**
 * Runs `distributed` on N simulated ranks (each backwarding its own loss) and `single` once on
 * copies of every rank's input (backwarding the sum of the losses); the input gradients must agree.
 */
async function compare(
  { xShape, cShape }: Setup,
  distributed: (x: Tensor, rank: number, group: ReturnType<typeof fakeWorld>[number]) => Promise<Tensor>,
  single: (xs: Tensor[], rank: number) => Tensor,
): Promise<void> {
  const before = tf.memory().numTensors;
  const cs = [...Array(N).keys()].map((r) => randn(cShape, { seed: 50 + r }));
  const xs = [...Array(N).keys()].map((r) => randn(xShape, { requiresGrad: true, seed: 10 + r }));
  const groups = fakeWorld(N);
  await Promise.all(
    groups.map(async (g, r) => {
      const y = await distributed(xs[r]!, r, g);
      const loss = sum(mul(y, cs[r]!));
      await loss.backward();
      loss.dispose();
    }),
  );
  const refs = xs.map((x) => x.detach().requiresGrad_());
  const total = refs.map((_, r) => sum(mul(single(refs, r), cs[r]!))).reduce((a, b) => a.add(b));
  await total.backward();
  for (const [r, x] of xs.entries()) {
    expectAllClose(x.grad!.dataSync(), refs[r]!.grad?.dataSync() ?? new Float32Array(x.size), 4);
  }
  disposeAll(...cs, ...xs, ...refs, total);
  expect(tf.memory().numTensors).toBe(before);
}

const addAll = (xs: Tensor[]) => xs.reduce((a, b) => a.add(b));
const chunk = (x: Tensor, r: number) => x.narrow(0, 2 * r, 2);

describe('differentiable collectives on a fake 3-rank group', () => {
  it('allReduce sum and avg', async () => {
    await compare({ xShape: [2, 3], cShape: [2, 3] }, (x, _r, g) => allReduce(x, g), (xs) => addAll(xs));
    await compare({ xShape: [4], cShape: [4] }, (x, _r, g) => allReduce(x, g, { op: 'avg' }), (xs) => addAll(xs).div(N));
  });

  it('allGather', async () => {
    await compare(
      { xShape: [2, 2], cShape: [2 * N, 2] },
      async (x, _r, g) => {
        const parts = await allGather(x, g);
        const y = concat(parts, 0);
        disposeAll(...parts);
        return y;
      },
      (xs) => concat(xs, 0),
    );
  });

  it('reduceScatter sum and avg', async () => {
    await compare({ xShape: [2 * N, 3], cShape: [2, 3] }, (x, _r, g) => reduceScatter(x, g), (xs, r) => addAll(xs.map((x) => chunk(x, r))));
    await compare(
      { xShape: [2 * N, 1], cShape: [2, 1] },
      (x, _r, g) => reduceScatter(x, g, { op: 'avg' }),
      (xs, r) => addAll(xs.map((x) => chunk(x, r))).div(N),
    );
  });

  it('broadcast', async () => {
    await compare({ xShape: [3, 2], cShape: [3, 2] }, (x, _r, g) => broadcast(x, g, { src: 1 }), (xs) => xs[1]!.mul(1));
  });
});

import { fromTf, noGrad, tidy } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { ModuleError } from '../module.js';
import { type GoldenTensor, goldenToTf, loadFixture, maxAbsDiff } from '../test/fixtures.js';
import { BatchNorm1d, BatchNorm2d, LayerNorm } from './norm.js';

type BnKeys = 'x' | 'weight' | 'bias' | 'running_mean' | 'running_var' | 'dy';
interface BnGolden {
  inputs: Record<BnKeys, GoldenTensor>;
  outputs: Record<'y' | 'running_mean' | 'running_var' | 'dx' | 'dweight' | 'dbias', GoldenTensor>;
}

const close = (got: tf.Tensor | null, want: GoldenTensor, what: string) => {
  expect(got, what).not.toBeNull();
  expect(maxAbsDiff((got as tf.Tensor).dataSync(), want.data), what).toBeLessThan(1e-4);
};

describe('BatchNorm2d reproduces PyTorch', () => {
  for (const name of ['batchnorm2d_n4_c3', 'batchnorm2d_n6_c2']) {
    it(`${name}: y, running stats, dx, dweight, dbias`, async () => {
      const g = loadFixture<BnGolden>(name);
      const bn = new BatchNorm2d(g.inputs.weight.shape[0]);
      const state = Object.fromEntries(
        (['weight', 'bias', 'running_mean', 'running_var'] as const).map((k) => [k, goldenToTf(g.inputs[k])]),
      );
      bn.loadStateDict({ ...state, num_batches_tracked: tf.scalar(0, 'int32') });
      tf.dispose(Object.values(state));
      const x = fromTf(goldenToTf(g.inputs.x), { requiresGrad: true });
      const dy = goldenToTf(g.inputs.dy);
      const y = tidy(() => bn.forward(x));
      close(y.data, g.outputs.y, 'y');
      await y.backward(dy);
      close(bn.runningMean.data, g.outputs.running_mean, 'running_mean');
      close(bn.runningVar.data, g.outputs.running_var, 'running_var');
      close(x.grad, g.outputs.dx, 'dx');
      close(bn.weight?.grad ?? null, g.outputs.dweight, 'dweight');
      close(bn.bias?.grad ?? null, g.outputs.dbias, 'dbias');
      expect(bn.stateDict().get('num_batches_tracked')?.dataSync()[0]).toBe(1);
      // Eval mode normalises with the running statistics instead.
      bn.eval();
      const yEval = tidy(() => noGrad(() => bn.forward(x)));
      const want = tf.tidy(() =>
        tf.add(
          tf.mul(
            tf.div(
              tf.sub(x.data, tf.reshape(bn.runningMean.data, [1, -1, 1, 1])),
              tf.sqrt(tf.add(tf.reshape(bn.runningVar.data, [1, -1, 1, 1]), 1e-5)),
            ),
            tf.reshape((bn.weight as { data: tf.Tensor }).data, [1, -1, 1, 1]),
          ),
          tf.reshape((bn.bias as { data: tf.Tensor }).data, [1, -1, 1, 1]),
        ),
      );
      expect(maxAbsDiff(yEval.dataSync(), want.dataSync())).toBeLessThan(1e-5);
      tf.dispose([dy, want]);
      for (const t of [y, yEval, x]) t.dispose();
      bn.dispose();
    });
  }

  it('channels near 1e4: no further from float64 than torch 1.13 in float32 (y was 8× its error)', async () => {
    const g = loadFixture<BnGolden & { float32_error: Record<string, number> }>('batchnorm2d_far_from_zero');
    const bn = new BatchNorm2d(3);
    const affine = { weight: goldenToTf(g.inputs.weight), bias: goldenToTf(g.inputs.bias) };
    bn.loadStateDict(affine, false);
    tf.dispose(Object.values(affine));
    const x = fromTf(goldenToTf(g.inputs.x), { requiresGrad: true });
    const y = tidy(() => bn.forward(x));
    await y.backward(goldenToTf(g.inputs.dy));
    const got = { y: y.data, running_mean: bn.runningMean.data, dx: x.grad, dweight: bn.weight?.grad };
    for (const [name, t] of Object.entries(got)) {
      const error = maxAbsDiff((t as tf.Tensor).dataSync(), g.outputs[name as keyof typeof got].data);
      // was 7–50× torch's error: running_mean 4.3e-4, dx 1.0e-3, dweight 0.16 (torch 1.2e-2)
      expect(error, name).toBeLessThanOrEqual(1.5 * g.float32_error[name] + 1e-6);
    }
  });

  it('BatchNorm1d accepts [N, C] and [N, C, L]; cumulative average when momentum is null', () => {
    const bn = new BatchNorm1d(3, { momentum: null });
    for (const shape of [
      [4, 3],
      [2, 3, 5],
    ]) {
      const x = fromTf(tf.randomNormal(shape, 2, 1, 'float32', 7));
      tidy(() => bn.forward(x));
      x.dispose();
    }
    expect(bn.stateDict().get('num_batches_tracked')?.dataSync()[0]).toBe(2);
    const mean = Array.from(bn.runningMean.dataSync());
    for (const m of mean) expect(m).toBeGreaterThan(1); // average of the two batch means (about 2), not 0.1-weighted
    const bad = fromTf(tf.zeros([2, 4]));
    expect(() => bn.forward(bad)).toThrow(/got 4 channels/);
    bad.dispose();
    bn.dispose();
  });

  // a constant channel with eps 0 was NaN (0 / 0) in its output and every gradient; torch's invstd is 0 there
  it("eps 0: a constant channel normalises to 0 and its gradients are torch 1.13's", async () => {
    const bn = new BatchNorm1d(2, { eps: 0 });
    const x = fromTf(tf.tensor2d([1, 2, 1, 3, 1, 5], [3, 2]), { requiresGrad: true });
    const y = bn.forward(x).retain();
    const loss = y.mul(fromTf(tf.tensor2d([1, 2, 3, 4, 5, 7], [3, 2]))).sum();
    await loss.backward();
    const near = (got: tf.Tensor | null, want: number[]) =>
      expect(maxAbsDiff(got!.dataSync(), want)).toBeLessThan(1e-6);
    near(y.data, [0, -1.0690449, 0, -0.2672612, 0, 1.3363063]);
    near(x.grad, [0, -0.1145403, 0, 0.1718107, 0, -0.057271]);
    near(bn.weight!.grad, [0, 6.1470098]);
    near(bn.runningVar.data, [0.9, 1.1333333]);
    for (const t of [x, y, loss]) t.dispose();
    bn.dispose();
  });

  it('refuses one value per channel in training (was: output 0 whatever the input); an empty batch keeps the stats', () => {
    for (const [bn, shape] of [
      [new BatchNorm1d(3), [1, 3]],
      [new BatchNorm1d(3), [1, 3, 1]],
      [new BatchNorm2d(2), [1, 2, 1, 1]],
      [new BatchNorm1d(3, { trackRunningStats: false }), [1, 3]],
    ] as const) {
      const x = fromTf(tf.randomNormal([...shape], 0, 1, 'float32', 3));
      expect(() => bn.forward(x)).toThrow(/expected more than 1 value per channel when training, got input \[1,/);
      bn.eval();
      if (bn.trackRunningStats) tidy(() => bn.forward(x)); // eval uses the running stats: fine
      bn.dispose();
      x.dispose();
    }
    const bn = new BatchNorm2d(2);
    const one = fromTf(tf.randomNormal([1, 2, 2, 2], 0, 1, 'float32', 4)); // 4 values per channel: fine
    tidy(() => bn.forward(one));
    const empty = fromTf(tf.zeros([0, 2, 2, 2]));
    const before = [bn.runningMean, bn.runningVar].map((t) => Array.from(t.dataSync()));
    const y = tidy(() => bn.forward(empty));
    expect(y.shape).toEqual([0, 2, 2, 2]);
    // before: running_mean took uninitialised memory (3.6e-42) and running_var shrank by (1 - momentum)
    expect([bn.runningMean, bn.runningVar].map((t) => Array.from(t.dataSync()))).toEqual(before);
    expect(bn.stateDict().get('num_batches_tracked')?.dataSync()[0]).toBe(2);
    for (const t of [one, empty, y]) t.dispose();
    bn.dispose();
  });

  it('refuses an int or bool input in training and eval alike, as torch', () => {
    const bn = new BatchNorm2d(1);
    for (const dtype of ['int32', 'bool'] as const) {
      const x = fromTf(tf.ones([2, 1, 2, 2], dtype));
      for (const mode of ['train', 'eval'] as const) {
        bn[mode]();
        expect(() => bn.forward(x)).toThrow(/float32, got/);
      }
      x.dispose();
    }
    bn.dispose();
  });
});

describe('LayerNorm', () => {
  // probe CY: tfjs's untyped "shape comprised of positive integers" (a string showed as [4]), or, without the
  // affine weights, nothing until the first forward
  it.each([2.5, [4, -1], Number.NaN, '4'])('refuses normalizedShape %j with a ModuleError', (shape) => {
    expect(() => new LayerNorm(shape as number)).toThrow(/LayerNorm: normalizedShape must be integers >= 0/);
    expect(() => new LayerNorm(shape as number, { elementwiseAffine: false })).toThrow(ModuleError);
  });

  it.each([
    [4, [2, 3]],
    [
      [3, 2],
      [2, 3],
    ],
    [768, [2, 3]],
    [[2, 3], [3]],
  ] as const)(
    'LayerNorm(%j) without affine refuses input %j, as torch (was: normalised over its last dims)',
    (n, shape) => {
      const ln = new LayerNorm(n as number | number[], { elementwiseAffine: false });
      const x = tidy(() => fromTf(tf.ones([...shape])));
      expect(() => ln.forward(x)).toThrow(/LayerNorm\(\[[\d, ]+\]\) expects input of shape \[\*, [\d, ]+\], got \[/);
      x.dispose();
    },
  );

  it('normalises the trailing dims with ones/zeros affine init', () => {
    const ln = new LayerNorm(4);
    expect(Array.from(ln.weight?.dataSync() ?? [])).toEqual([1, 1, 1, 1]);
    const x = fromTf(
      tf.tensor([
        [1, 2, 3, 4],
        [2, 2, 2, 6],
      ]),
    );
    const y = tidy(() => ln.forward(x));
    const rows = y.arraySync() as number[][];
    for (const r of rows) {
      expect(r.reduce((a, b) => a + b, 0)).toBeCloseTo(0, 5);
      expect(r.reduce((a, b) => a + b * b, 0) / 4).toBeCloseTo(1, 3);
    }
    for (const t of [x, y]) t.dispose();
    ln.dispose();
  });
});

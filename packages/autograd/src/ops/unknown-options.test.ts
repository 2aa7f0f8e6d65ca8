import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import {
  AutogradArgumentError,
  autocast,
  backward,
  conv2d,
  dropout,
  fromTf,
  full,
  gelu,
  layerNorm,
  matmul,
  max,
  maxPool2d,
  mean,
  min,
  ones,
  rand,
  randn,
  sum,
  Tensor,
  tensor,
  zeros,
} from '../index.js';

/**
 * An option an op does not know is refused, naming the op and the options it has: ignored, it
 * changed the result without a word (`sum(x, { axis: 1 })` summed every element; conv2d's
 * `dilation`, maxPool2d's `ceilMode` and `dilation` gave another shape; torch spellings such as
 * `keepDims`, `requires_grad` were dropped).
 */
describe('unknown options get an AutogradArgumentError', () => {
  const x = () => randn([1, 2, 8, 8], { seed: 1 });
  const w = () => randn([2, 2, 3, 3], { seed: 2 });
  // options a TypeScript literal would refuse, as a ported config passes them
  const bad = (o: object) => o as never;
  const cases: [string, () => unknown, RegExp][] = [
    ['sum', () => sum(x(), bad({ axis: 1 })), /sum: unknown option "axis".*its options are dim, keepdim/],
    ['mean', () => mean(x(), bad({ dim: 1, keepDims: true })), /mean: unknown option "keepDims"/],
    ['max', () => max(x(), bad({ axis: 0 })), /max: unknown option "axis"/],
    ['min', () => min(x(), bad({ keep_dim: true })), /min: unknown option "keep_dim"/],
    ['conv2d', () => conv2d(x(), w(), null, bad({ dilation: 2 })), /conv2d: unknown option "dilation"/],
    ['maxPool2d', () => maxPool2d(x(), 3, bad({ stride: 2, ceilMode: true })), /maxPool2d: unknown option "ceilMode"/],
    ['matmul', () => matmul(x(), x(), bad({ transpose_b: true })), /did you mean transposeB\?/],
    ['layerNorm', () => layerNorm(x(), null, null, bad({ epsilon: 1e-3 })), /layerNorm: unknown option "epsilon"/],
    ['gelu', () => gelu(x(), bad({ approx: 'tanh' })), /gelu: unknown option "approx"/],
    ['dropout', () => dropout(x(), 0.5, bad({ inplace: true })), /dropout: unknown option "inplace"/],
    ['tensor', () => tensor([1, 2], undefined, bad({ requires_grad: true })), /did you mean requiresGrad\?/],
    ['zeros', () => zeros([2], bad({ device: 'cpu' })), /zeros: unknown option "device"/],
    ['ones', () => ones([2], bad({ grad: true })), /ones: unknown option "grad"/],
    ['full', () => full([2], 1, bad({ dtyp: 'int32' })), /full: unknown option "dtyp"/],
    ['randn', () => randn([2], bad({ dtype: 'int32' })), /randn: unknown option "dtype"/],
    ['rand', () => rand([2], bad({ min: -1 })), /rand: unknown option "min"/],
    ['fromTf', () => fromTf(tf.zeros([2]), bad({ dtype: 'int32' })), /fromTf: unknown option "dtype"/],
  ];
  it.each(cases)('%s', (_, call, message) => {
    expect(call).toThrow(AutogradArgumentError);
    expect(call).toThrow(message);
  });

  it('known options still work, and no options at all', () => {
    expect(sum(randn([2, 3], { seed: 3 }), { dim: 1, keepdim: true }).shape).toEqual([2, 1]);
    expect(conv2d(x(), w(), null, { stride: 2, padding: 1 }).shape).toEqual([1, 2, 4, 4]);
    expect(maxPool2d(x(), 2).shape).toEqual([1, 2, 4, 4]);
    expect(randn([2], { seed: 1, requiresGrad: true }).requiresGrad).toBe(true);
  });
});

// each was truthy: `keepdim: 'false'` kept the dim, `training: 'false'` dropped in eval, `requiresGrad: 'false'`
// trained a frozen leaf, `enabled: 'false'` ran autocast
describe('boolean options given anything but true or false get an AutogradArgumentError', () => {
  const x = () => randn([2, 3], { seed: 1 });
  const no = 'false' as never;
  const cases: [string, () => unknown][] = [
    ['sum: keepdim', () => sum(x(), { dim: 1, keepdim: no })],
    ['mean: keepdim', () => mean(x(), 1, no)],
    ['max: keepdim', () => max(x(), { dim: 0, keepdim: no })],
    ['dropout: training', () => dropout(x(), 0.5, { training: no })],
    ['matmul: transposeB', () => matmul(x(), x(), { transposeB: no })],
    ['tensor: requiresGrad', () => tensor([1, 2], undefined, { requiresGrad: no })],
    ['zeros: requiresGrad', () => zeros([2], { requiresGrad: no })],
    ['randn: requiresGrad', () => randn([2], { requiresGrad: no })],
    ['fromTf: requiresGrad', () => fromTf(tf.zeros([2]), { requiresGrad: no })],
    ['Tensor: requiresGrad', () => new Tensor(tf.zeros([2]), { requiresGrad: no })],
    [
      'Tensor: requiresGrad',
      () => {
        x().requiresGrad = no;
      },
    ],
    ['backward: retainGraph', () => backward(sum(randn([2], { requiresGrad: true })), undefined, { retainGraph: no })],
    ['autocast: enabled', () => autocast({ enabled: no }, () => 1)],
  ];
  it.each(cases)('%s', async (what, call) => {
    const run = async () => call(); // backward's refusal is its promise's
    await expect(run()).rejects.toThrow(AutogradArgumentError);
    await expect(run()).rejects.toThrow(`${what} must be a boolean, got "false"`);
  });
});

// rand's low '1' concatenated in tfjs's low + (high − low)·u: samples in [10, 11), silently; the others failed untyped
describe('numeric options given a string get an AutogradArgumentError', () => {
  const s = (v: string) => v as never;
  const cases: [string, () => unknown][] = [
    ['rand: low', () => rand([4], { low: s('1'), high: 2 })],
    ['rand: high', () => rand([4], { high: s('2') })],
    ['rand: seed', () => rand([4], { seed: s('3') })],
    ['randn: seed', () => randn([4], { seed: s('3') })],
    ['dropout: p', () => dropout(randn([4], { seed: 1 }), s('0.5'))],
    ['layerNorm: eps', () => layerNorm(randn([2, 4], { seed: 1 }), null, null, { eps: s('1e-5') })],
  ];
  it.each(cases)('%s', (what, call) => {
    expect(call).toThrow(AutogradArgumentError);
    expect(call).toThrow(`${what} must be a number, got "`);
  });
  it('numbers still work: rand in [low, high)', () => {
    const values = rand([64], { low: 1, high: 2, seed: 1 }).data.dataSync();
    expect(Math.min(...values)).toBeGreaterThanOrEqual(1);
    expect(Math.max(...values)).toBeLessThan(2);
  });
});

import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import {
  AutogradArgumentError,
  argmax,
  argmin,
  clamp,
  logsumexp,
  stack,
  std,
  type Tensor,
  tensor,
  variance,
} from '../index.js';
import { expectGradsMatch as check, leaf } from '../test/utils.js';

const x = () => tensor([1, -2, 3, 3, 0.5, -1], [2, 3], { requiresGrad: true });

/** f(x), its shape and x's gradient of sum(f(x) · [1, 2, …]), as the torch script below computes them. */
async function run(f: (x: Tensor) => Tensor, input = x()) {
  const y = f(input).retain();
  const weights = tensor(
    Array.from({ length: y.size }, (_, i) => i + 1),
    y.shape,
  );
  await y.mul(weights).sum().backward();
  const out = { y: Array.from(y.dataSync()), shape: y.shape, grad: Array.from(input.grad?.dataSync() ?? []) };
  for (const t of [y, weights, input]) t.dispose();
  return out;
}

const close = (got: number[], want: number[], digits = 5) => {
  expect(got.length).toBe(want.length);
  got.forEach((g, i) => {
    if (Number.isNaN(want[i]) || !Number.isFinite(want[i])) expect(g).toBe(want[i]);
    else expect(g).toBeCloseTo(want[i], digits);
  });
};

// torch 1.13, x = [[1, -2, 3], [3, 0.5, -1]], backward of (f(x) * arange(1, n + 1)).sum(); before, each op was
// missing (a TypeError in a torch port: x.clamp is not a function)
describe('ops a torch port reaches for, against torch 1.13', () => {
  it('clamp: bounds included in the gradient, either side open', async () => {
    expect(await run((t) => t.clamp(-1, 2))).toEqual({
      y: [1, -1, 2, 2, 0.5, -1],
      shape: [2, 3],
      grad: [1, 0, 0, 0, 5, 6],
    });
    expect((await run((t) => clamp(t, 0.5))).grad).toEqual([1, 0, 3, 4, 5, 0]);
    expect((await run((t) => clamp(t, null, 1))).grad).toEqual([1, 2, 0, 0, 5, 6]);
    const nan = tensor([Number.NaN, 2], [2], { requiresGrad: true });
    expect(await run((t) => t.clamp(0, 1), nan)).toEqual({ y: [Number.NaN, 1], shape: [2], grad: [0, 0] });
    expect(Array.from(clamp(tensor([1, 2, 3], [3], { dtype: 'int32' }), 1.5).dataSync())).toEqual([1.5, 2, 3]);
    expect(() => clamp(x())).toThrow(AutogradArgumentError);
  });

  it('stack and expand: shapes and summed-back gradients', async () => {
    expect(await run((t) => stack([t, t.mul(2)], 1))).toEqual({
      y: [1, -2, 3, 2, -4, 6, 3, 0.5, -1, 6, 1, -2],
      shape: [2, 2, 3],
      grad: [9, 12, 15, 27, 30, 33],
    });
    expect((await run((t) => stack([t, t.mul(t)], -1))).grad).toEqual([5, -13, 41, 55, 19, -13]);
    const expanded = await run((t) => t.reshape(2, 1, 3).expand(2, 4, 3));
    expect([expanded.shape, expanded.grad]).toEqual([
      [2, 4, 3],
      [22, 26, 30, 70, 74, 78],
    ]);
    expect(() => x().expand(2, 4)).toThrow(/expand: \[2,3\] to \[2,4\]: dim 1 is 3, which only expands from 1/);
    expect(() => stack([x(), tensor([1, 2], [2])])).toThrow(/stack: tensor 1 is \[2\] and tensor 0 \[2,3\]/);
  });

  it('argmax and argmin: the first extreme, a NaN as the extreme, int32, flattened without a dim', () => {
    const v = (t: Tensor) => [t.dtype, Array.from(t.dataSync()), t.shape];
    expect(v(argmax(x()))).toEqual(['int32', [2], []]);
    expect(v(x().argmax(1))).toEqual(['int32', [2, 0], [2]]);
    expect(v(argmin(x(), 0, true))).toEqual(['int32', [0, 0, 1], [1, 3]]);
    expect(v(argmax(x(), undefined, true))).toEqual(['int32', [2], [1, 1]]);
    const nan = tensor([1, Number.NaN, 3, 2, 5, Number.NaN], [2, 3]);
    expect([v(argmax(nan, 1))[1], v(argmin(nan, 1))[1], v(argmax(nan))[1]]).toEqual([[1, 2], [1, 2], [1]]);
    expect(v(argmax(tensor(3, []), 0, true))).toEqual(['int32', [0], []]); // torch: a 0-d input stays 0-d
    expect(() => argmax(tensor([true, false], [2], { dtype: 'bool' }))).toThrow(/not defined for a bool tensor/);
  });

  it('var and std: Bessel-corrected by default, correction 0, their gradients', async () => {
    const all = await run((t) => t.var());
    close([...all.y, ...all.grad], [4.1750002, 0.1, -1.1, 0.9, 0.9, -0.1, -0.7]);
    const rows = await run((t) => variance(t, 1));
    close(
      [...rows.y, ...rows.grad],
      [6.3333335, 4.0833335, 0.3333333, -2.6666667, 2.3333333, 4.3333335, -0.6666666, -3.6666665],
    );
    const population = await run((t) => variance(t, { dim: 0, correction: 0, keepdim: true }));
    expect(population.shape).toEqual([1, 3]);
    close([...population.y, ...population.grad], [1, 1.5625, 4, -1, -2.5, 6, 1, 2.5, -6]);
    const sd = await run((t) => std(t, 1));
    close(
      [...sd.y, ...sd.grad],
      [2.5166116, 2.020726, 0.0662266, -0.5298129, 0.4635863, 1.072222, -0.1649572, -0.9072646],
    );
  });

  // probe CB: torch's second positional argument is unbiased (read as keepdim, var(1, false) was corrected);
  // std's gradient where it is 0 was NaN (a constant row normalised by its std put NaN in the weights)
  it("var and std take torch's (dim, unbiased, keepdim); std's gradient is 0 where std is 0", async () => {
    const t = x();
    close(Array.from(t.var(1, false).dataSync()), [4.2222223, 2.7222223]);
    close(Array.from(std(t, 0, false).dataSync()), [1, 1.25, 2]);
    expect(t.var(1, true, true).shape).toEqual([2, 1]);
    close(Array.from(variance(t, false).dataSync()), [3.4791667]);
    expect(() => variance(t, { correction: 0, unbiased: false })).toThrow(/correction or unbiased, not both/);
    t.dispose();
    const rows = tensor([2, 2, 2, 1, -2, 3], [2, 3], { requiresGrad: true });
    const normalised = await run((r) => r.sub(r.mean(1, true)).div(r.std(1, true, true).add(1e-5)), rows);
    close(normalised.grad, [-100000, 0, 100000, -0.4183, 0.1673, 0.251], 3);
    expect((await run((r) => r.std(), tensor([2, 2, 2], [3], { requiresGrad: true }))).grad).toEqual([0, 0, 0]);
  });

  it('logsumexp: stable for large values, -inf rows as torch, softmax as its gradient', async () => {
    const rows = await run((t) => logsumexp(t, 1));
    close(
      [...rows.y, ...rows.grad],
      [3.1328452, 3.0956743, 0.1184997, 0.0058998, 0.8756006, 1.8175199, 0.1491911, 0.033289],
    );
    const whole = await run((t) => t.logsumexp([0, 1], true));
    expect(whole.shape).toEqual([1, 1]);
    close(whole.y, [3.8075795]);
    const inf = Number.NEGATIVE_INFINITY;
    const big = tensor([1e4, 1e4 - 1, inf, inf, inf, inf], [2, 3], { requiresGrad: true });
    const edge = await run((t) => logsumexp(t, 1), big);
    // torch's gradient, exp(x − result), carries the result's rounding at 1e4 (ulp 1e-3): 3 digits
    close(
      [...edge.y, ...edge.grad],
      [10000.3134766, inf, 0.7309015, 0.2688836, 0, Number.NaN, Number.NaN, Number.NaN],
      3,
    );
  });

  it('leave no tensors behind', async () => {
    const before = tf.memory().numTensors;
    const input = x();
    // composites (stack, std, logsumexp) free their own intermediates, as mse does (no tidy needed)
    const outs = [
      input.clamp(0),
      stack([input, input]),
      input.expand(2, 2, 3),
      input.argmax(),
      input.std(),
      input.logsumexp(1),
      input.var(0),
    ];
    for (const o of outs) o.dispose();
    input.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('finite-difference gradients on random values', async () => {
    await check((a) => clamp(a, -0.3, 0.4).mul(a), [leaf([3, 4])]);
    await check((a, b) => stack([a, b.exp()], 1).square(), [leaf([2, 3]), leaf([2, 3])]);
    await check((a) => a.reshape(3, 1).expand(2, 3, 4).square(), [leaf([3])]);
    await check((a) => variance(a, { dim: [0, 2], correction: 0 }), [leaf([2, 3, 2])]);
    await check((a) => std(a, 1, true), [leaf([3, 4])]);
    await check((a) => logsumexp(a, -1), [leaf([2, 5])]);
  });
});

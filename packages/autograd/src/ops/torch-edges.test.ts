import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import {
  AutogradArgumentError,
  add,
  autocast,
  batchNormStats,
  conv2d,
  crossEntropy,
  dropout,
  gelu,
  indexSelect,
  l2Normalize,
  layerNorm,
  linear,
  logSoftmax,
  matmul,
  max,
  maxPool2d,
  mean,
  min,
  mse,
  mul,
  pad,
  pow,
  relu,
  slice,
  softmax,
  sub,
  sum,
  Tensor,
  tensor,
  where,
} from '../index.js';
import { disposeAll } from '../test/utils.js';

// Expected values are torch 1.13's for the same calls (F.cross_entropy, F.max_pool2d, sum(x, [])…).
const close = (got: number[], want: number[]) => {
  for (const [i, g] of got.entries()) expect(g).toBeCloseTo(want[i], 5);
};
const values = (t: { dataSync(): ArrayLike<number> }) => Array.from(t.dataSync());

describe('values at the edges, as torch gives them', () => {
  it('cross entropy with a −∞ logit (a masked class): finite loss, inf when it is the target', async () => {
    const x = tensor([-Infinity, 2, 3, 1, 2, 3], [2, 3], { requiresGrad: true });
    close(values(crossEntropy(x, [2, 1], { reduction: 'none' })), [0.31326166, 1.4076059]);
    close(values(crossEntropy(x, [-100, 1], { reduction: 'none' })), [0, 1.4076059]);
    const loss = crossEntropy(x, [2, 1]);
    expect(loss.item()).toBeCloseTo(0.86043376, 5);
    await loss.backward();
    close(values(x.grad!), [0, 0.13447072, -0.1344707, 0.04501529, -0.37763575, 0.3326205]);
    expect(crossEntropy(tensor([-Infinity, 2, 3], [1, 3]), [0]).item()).toBe(Number.POSITIVE_INFINITY);
  });

  it('max pool: a window holding NaN is NaN, and its gradient goes to the NaN', async () => {
    const x = tensor([1, Number.NaN, 3, 2], [1, 1, 2, 2], { requiresGrad: true });
    const y = maxPool2d(x, 2);
    expect(values(y)).toEqual([Number.NaN]);
    await sum(y).backward();
    expect(values(x.grad!)).toEqual([0, 1, 0, 0]);
  });

  it('max pool: an all −∞ window sends its gradient to its first element inside the input, not the padding', async () => {
    const x = new Tensor(tf.fill([1, 1, 2, 2], Number.NEGATIVE_INFINITY), { requiresGrad: true });
    await sum(maxPool2d(x, 2, { stride: 1, padding: 1 })).backward();
    expect(values(x.grad!)).toEqual([4, 2, 2, 1]);
  });

  it('a size-1 dim broadcasts to size 0: the gradient of an empty leaf is empty; where over no rows is empty', async () => {
    const x = new Tensor(tf.zeros([0, 3]), { requiresGrad: true });
    await sum(sum(x, { dim: 0 })).backward();
    expect(x.grad!.shape).toEqual([0, 3]);
    const y = new Tensor(tf.zeros([0, 3]), { requiresGrad: true });
    await sum(mean(y, { dim: 0 })).backward();
    expect(y.grad!.shape).toEqual([0, 3]);
    const picked = where(new Tensor(tf.zeros([0, 1], 'bool')), tensor([1, 2, 3]), 0);
    expect(picked.shape).toEqual([0, 3]);
  });

  it('an empty list of dims reduces over every dim (sum, mean, max, min)', async () => {
    const x = tensor([0, 1, 2, 3, 4, 5], [2, 3], { requiresGrad: true });
    expect(
      [sum(x, { dim: [] }), mean(x, { dim: [] }), max(x, { dim: [] }), min(x, { dim: [] })].map((t) => t.item()),
    ).toEqual([15, 2.5, 5, 0]);
    await mean(x, { dim: [] }).backward();
    close(values(x.grad!), Array(6).fill(1 / 6));
  });

  it('two bool tensors: + is or, * is and, both bool; − is refused', () => {
    const a = new Tensor(tf.tensor([true, false, true], undefined, 'bool'));
    const b = new Tensor(tf.tensor([true, true, false], undefined, 'bool'));
    const or = add(a, b);
    expect([or.dtype, values(or)]).toEqual(['bool', [1, 1, 1]]);
    expect(values(mul(a, b))).toEqual([1, 0, 0]);
    expect(() => sub(a, b)).toThrow(/subtracting two bool tensors/);
  });
});

describe('arguments torch refuses are refused, not taken for something else', () => {
  const x = () => tensor([0, 1, 2, 3, 4, 5], [2, 3]);
  it('a reduction or approximation outside the allowed values', () => {
    const logits = tensor([1, 2, 3], [1, 3]);
    expect(() => crossEntropy(logits, [0], { reduction: 'avg' as 'mean' })).toThrow(
      /crossEntropy: reduction must be one of 'mean', 'sum', 'none', got "avg"/,
    );
    expect(() => mse(x(), x(), { reduction: 'batchmean' as 'mean' })).toThrow(AutogradArgumentError);
    expect(() => gelu(x(), { approximate: 'Tanh' as 'tanh' })).toThrow(/gelu: approximate must be one of/);
    expect(gelu(tensor([1]), { approximate: 'tanh' }).item()).toBeCloseTo(0.841192, 5);
  });

  it('pad without a pair per dim, slice with more dims than the tensor, a 2-D index to indexSelect', () => {
    expect(() => pad(x(), [[1, 1]])).toThrow(/pad: one \[before, after\] pair per dim of \[2,3\]/);
    expect(() => slice(x(), [1, 0, 0], [1, -1, 5])).toThrow(
      /slice: begin \[1,0,0\] and size \[1,-1,5\] have more dims/,
    );
    expect(() => indexSelect(x(), 0, [[1, 0]])).toThrow(/indexSelect: the index must be 1-D, got \[1,2\]/);
  });

  it('integer operands to matmul or linear (tfjs has no integer product; autocast rounded them to 16 bits)', () => {
    const ints = new Tensor(tf.tensor([4097, 1], [1, 2], 'int32'));
    const col = new Tensor(tf.tensor([1, 0], [2, 1], 'int32'));
    expect(() => matmul(ints, col)).toThrow(/matmul: operands must be float32, got int32/);
    expect(() => autocast({ dtype: 'bfloat16' }, () => matmul(ints, col))).toThrow(AutogradArgumentError);
    expect(() => linear(ints, tensor([1, 2], [1, 2]))).toThrow(/linear: operands must be float32/);
  });

  it('int32 or bool operands to ops on real values (conv2d read int bits as floats: 1.4e-45; relu of a bool, bytes)', () => {
    const float = (shape: number[]) => new Tensor(tf.ones(shape));
    for (const dtype of ['int32', 'bool'] as const) {
      const image = new Tensor(tf.ones([1, 1, 2, 2], dtype));
      const rows = new Tensor(tf.ones([2, 3], dtype));
      const cases: [string, () => unknown][] = [
        ['conv2d', () => conv2d(image, float([1, 1, 1, 1]))],
        ['conv2d', () => conv2d(float([1, 1, 2, 2]), new Tensor(tf.ones([1, 1, 1, 1], dtype)))],
        ['maxPool2d', () => maxPool2d(image, 2)],
        ['softmax', () => softmax(rows, 0)],
        ['logSoftmax', () => logSoftmax(rows)],
        ['crossEntropy', () => crossEntropy(rows, [0, 1])],
        ['l2Normalize', () => l2Normalize(rows)],
        ['layerNorm', () => layerNorm(rows)],
        ['batchNormStats', () => batchNormStats(rows, [0])],
        ['gelu', () => gelu(rows)],
        ['dropout', () => dropout(rows, 0.5)],
      ];
      for (const [op, call] of cases)
        expect(call, `${op} ${dtype}`).toThrow(`${op}: operands must be float32, got ${dtype}`);
      disposeAll(image, rows);
    }
    expect(() => relu(new Tensor(tf.tensor([true, false], [2], 'bool')))).toThrow(/relu: not defined for a bool/);
    const ints = relu(new Tensor(tf.tensor([-2, 3], [2], 'int32')));
    expect([ints.dtype, values(ints)]).toEqual(['int32', [0, 3]]); // as torch: an int relu stays int
  });

  it('an integer to a negative integer power', () => {
    const ints = new Tensor(tf.tensor([1, 2, 3], undefined, 'int32'));
    expect(() => pow(ints, -1)).toThrow(/integers to negative integer powers/);
    expect(values(pow(ints, 2))).toEqual([1, 4, 9]);
  });

  it('indexSelect of no index has an all-zero gradient of the input shape', async () => {
    const t = tensor([0, 1, 2, 3, 4, 5], [2, 3], { requiresGrad: true });
    await sum(indexSelect(t, 1, [])).backward();
    expect(values(t.grad!)).toEqual([0, 0, 0, 0, 0, 0]);
  });
});

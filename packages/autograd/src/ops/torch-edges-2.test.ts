import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import {
  AutogradArgumentError,
  abs,
  concat,
  crossEntropy,
  embedding,
  fromTf,
  full,
  indexSelect,
  l2Normalize,
  log,
  maskedFill,
  mul,
  neg,
  sum,
  type Tensor,
  tensor,
  where,
} from '../index.js';

// Expected values are torch 1.13's for the same calls.
const values = (t: Tensor | tf.Tensor | null | undefined) => [
  ...((t instanceof tf.Tensor ? t : t?.data)?.dataSync() ?? []),
];

describe('edges found by trying the ops against torch (second round)', () => {
  // torch's clamp_min passes the gradient at x == min: ddp's gave [1, 2] and [3, 2]
  it('l2Normalize where the norm equals eps: the unclamped gradient', async () => {
    const x = tensor([1, 0], undefined, { requiresGrad: true });
    await sum(mul(l2Normalize(x, -1, 1), tensor([1, 2]))).backward();
    expect(values(x.grad)).toEqual([0, 2]);
    const y = tensor([0.6, 0.8], undefined, { requiresGrad: true });
    await sum(mul(l2Normalize(y, 0, 1), tensor([3, 2]))).backward();
    const [a, b] = values(y.grad);
    expect(a).toBeCloseTo(0.96, 5);
    expect(b).toBeCloseTo(-0.72, 5);
  });

  // tf.gather of an empty input: [1, 0, 2, 1] for [0, 2]; crossEntropy 'none' over no rows [1, 1, 0, 0]
  it("indexSelect and crossEntropy on empty inputs keep torch's shapes, and their gradients", async () => {
    const x = tensor(new Float32Array(0), [0, 3], { requiresGrad: true });
    const picked = indexSelect(x, 1, [0, 2]);
    expect(picked.shape).toEqual([0, 2]);
    await sum(picked).backward();
    expect(x.grad?.shape).toEqual([0, 3]);
    expect(indexSelect(tensor(new Float32Array(0), [2, 0]), 0, [1, 0, 1]).shape).toEqual([3, 0]);
    const logits = tensor(new Float32Array(0), [0, 3], { requiresGrad: true });
    const losses = crossEntropy(logits, tf.tensor1d([], 'int32'), { reduction: 'none' });
    expect(losses.shape).toEqual([0]);
    await sum(losses).backward();
    expect(logits.grad?.shape).toEqual([0, 3]);
  });

  it('an embedding of no ids has a zero gradient (was: "Cannot infer the missing size in [0,-1]")', async () => {
    const table = tensor([1, 2, 3, 4, 5, 6], [3, 2], { requiresGrad: true });
    await sum(embedding(tf.tensor2d([], [2, 0], 'int32'), table)).backward();
    expect(values(table.grad)).toEqual([0, 0, 0, 0, 0, 0]);
  });

  // were: int32 [1, 0, 1] for bool; -1294967296 for 3e9; bool indices read as rows 0 and 1; garbage for neg(bool)
  it('bools stay bool in maskedFill, where and cat; what torch refuses is refused', () => {
    const flags = tf.tensor1d([true, false, false], 'bool');
    const mask = tf.tensor1d([false, false, true], 'bool');
    const filled = maskedFill(fromTf(flags), mask, 1);
    expect(filled.dtype).toBe('bool');
    expect(values(filled)).toEqual([1, 0, 1]);
    expect(where(mask, fromTf(flags), fromTf(mask)).dtype).toBe('bool');
    const joined = concat([fromTf(flags), fromTf(mask)]);
    expect(joined.dtype).toBe('bool');
    expect(values(joined)).toEqual([1, 0, 0, 0, 0, 1]);
    const ids = fromTf(tf.tensor1d([1, 2, 3], 'int32'));
    expect(() => maskedFill(ids, mask, 3e9)).toThrow(/value 3000000000 cannot be converted to int32 without overflow/);
    expect(values(maskedFill(ids, mask, -7.9))).toEqual([1, 2, -7]);
    const rows = tensor([1, 2, 3, 4], [2, 2]);
    expect(() => indexSelect(rows, 0, tf.tensor1d([true, false], 'bool'))).toThrow(AutogradArgumentError);
    expect(() => crossEntropy(rows, tf.tensor1d([true, false], 'bool'))).toThrow(/got a bool tensor/);
    expect(() => neg(fromTf(flags))).toThrow(/neg: not defined for a bool tensor/);
    expect(() => abs(fromTf(flags))).toThrow(AutogradArgumentError);
  });

  it('functions of real values take int32 as float32, as torch promotes them (tfjs raised a dtype error)', () => {
    const y = log(fromTf(tf.tensor1d([1, 4], 'int32')));
    expect(y.dtype).toBe('float32');
    expect(values(y)[1]).toBeCloseTo(Math.log(4), 6);
  });

  it('int32 values torch cannot convert, and int32 totals past int32, are refused (tfjs wrapped them)', () => {
    // before: tensor([3e9]) held −1294967296, NaN 0, and 3 × 2^30 summed to −2^30, silently
    expect(() => tensor([1, 3e9], undefined, { dtype: 'int32' })).toThrow(/tensor: value 3000000000 cannot be/);
    expect(() => tensor([[1], [Number.NaN]], undefined, { dtype: 'int32' })).toThrow(/value NaN cannot be converted/);
    expect(() => full([1], -3e9, { dtype: 'int32' })).toThrow(/full: value -3000000000 cannot be converted/);
    expect(values(tensor(Float32Array.of(2.7, -2.7), [2], { dtype: 'int32' }))).toEqual([2, -2]);
    const big = tensor([2 ** 30, 2 ** 30, 2 ** 30, 1, 2, 3], [2, 3], { dtype: 'int32' });
    expect(() => sum(big)).toThrow(/sum: the int32 total 3221225478 does not fit int32 \(torch would give int64\)/);
    expect(() => sum(big, 1)).toThrow(/int32 total 3221225472 does not fit/);
    expect(values(sum(big, 0))).toEqual([2 ** 30 + 1, 2 ** 30 + 2, 2 ** 30 + 3]);
    expect(values(sum(tensor([2 ** 31 - 1, -1], [2], { dtype: 'int32' })))).toEqual([2 ** 31 - 2]);
  });

  it("a dtype name tfjs does not hold is refused with AutogradArgumentError (was: tfjs's untyped Error)", () => {
    for (const dtype of ['float64', 'int64', 'float16'])
      expect(() => tensor([1.5], undefined, { dtype: dtype as 'float32' })).toThrow(
        new RegExp(`tensor: dtype ${dtype} is not one of float32, int32, bool`),
      );
  });
});

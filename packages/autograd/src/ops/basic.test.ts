import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import {
  add,
  div,
  exp,
  log,
  matmul,
  max,
  mean,
  min,
  mul,
  neg,
  permute,
  pow,
  reshape,
  sqrt,
  sub,
  sum,
  Tensor,
  transpose,
} from '../index.js';
import { expectGradsMatch as check, expectAllClose, leaf } from '../test/utils.js';

describe('basic ops: finite-difference gradients', () => {
  const pairs: [string, number[], number[]][] = [
    ['same shape', [2, 3], [2, 3]],
    ['row broadcast', [2, 3], [3]],
    ['column broadcast', [2, 1, 4], [3, 1]],
    ['scalar', [2, 3], []],
  ];
  for (const [label, sa, sb] of pairs) {
    it(`add/sub/mul/div/pow with ${label}`, async () => {
      await check((a, b) => add(a, b), [leaf(sa), leaf(sb)]);
      await check((a, b) => sub(a, b), [leaf(sa), leaf(sb)]);
      await check((a, b) => mul(a, b), [leaf(sa), leaf(sb)]);
      await check((a, b) => div(a, b), [leaf(sa), leaf(sb, true)]);
      await check((a, b) => pow(a, b), [leaf(sa, true), leaf(sb, true)]);
    });
  }

  it('unary ops and number operands', async () => {
    await check((a) => neg(a).mul(2).add(1), [leaf([3, 2])]);
    await check((a) => exp(a), [leaf([3, 2])]);
    await check((a) => log(a), [leaf([3, 2], true)]);
    await check((a) => sqrt(a), [leaf([3, 2], true)]);
    await check((a) => pow(a, 3).div(2).sub(1), [leaf([4])]);
  });

  it('matmul: plain, transposed, batched and broadcast batches', async () => {
    await check((a, b) => matmul(a, b), [leaf([3, 4]), leaf([4, 2])]);
    await check((a, b) => matmul(a, b, { transposeB: true }), [leaf([3, 4]), leaf([2, 4])]);
    await check((a, b) => matmul(a, b, { transposeA: true, transposeB: true }), [leaf([4, 3]), leaf([2, 4])]);
    await check((a, b) => matmul(a, b), [leaf([2, 3, 4]), leaf([4, 2])]);
    await check((a, b) => matmul(a, b, { transposeB: true }), [leaf([2, 2, 3, 4]), leaf([5, 4])]);
    await check((a, b) => matmul(a, b, { transposeA: true }), [leaf([2, 1, 4, 3]), leaf([3, 4, 2])]);
  });

  it('reductions over dims', async () => {
    await check((a) => sum(a), [leaf([2, 3])]);
    await check((a) => sum(a, { dim: [0, 2], keepdim: true }), [leaf([2, 3, 2])]);
    await check((a) => mean(a, { dim: -1 }), [leaf([2, 3, 2])]);
    await check((a) => max(a, { dim: 1 }), [leaf([3, 4])]);
    await check((a) => min(a, { dim: [0, 1] }), [leaf([3, 2, 2])]);
  });

  it('shape ops', async () => {
    await check((a) => reshape(a, [3, -1]).mul(reshape(a, [3, 4])), [leaf([2, 6])]);
    await check((a) => permute(a, [2, 0, 1]).exp(), [leaf([2, 3, 4])]);
    await check((a) => transpose(a, 0, -1).exp(), [leaf([2, 3, 4])]);
  });
});

describe('pow at a zero base or a zero exponent, against torch 1.13', () => {
  it('gives 0 where torch does (was NaN: 0·0⁻¹ and 0·log 0), NaN where torch does', async () => {
    const a = new Tensor(tf.tensor([0, -2, 2, 0, 1.5, 0, 3, -1], [2, 4]), { requiresGrad: true });
    const b = new Tensor(tf.tensor([2, 0, 0.5, 0]), { requiresGrad: true });
    await sum(pow(a, b)).backward();
    // torch: a.pow(b).sum().backward()
    expectAllClose(a.grad!.dataSync(), [0, 0, 0.35355338, 0, 3, 0, 0.28867513, 0], 6);
    const db = Array.from(b.grad!.dataSync());
    expect([db[0], db[2]].map((v) => v.toFixed(5))).toEqual(['0.91230', '2.88311']);
    expect([db[1], db[3]]).toEqual([Number.NaN, Number.NaN]); // log of a negative base, as torch
    const x = new Tensor(tf.tensor([0, 2, -3]), { requiresGrad: true });
    await sum(pow(x, 0)).backward();
    expect(Array.from(x.grad!.dataSync())).toEqual([0, 0, 0]);
    const e = new Tensor(tf.tensor([0, 1, 2]), { requiresGrad: true });
    await sum(pow(new Tensor(tf.scalar(0)), e)).backward();
    expect(Array.from(e.grad!.dataSync())).toEqual([0, 0, 0]);
  });
});

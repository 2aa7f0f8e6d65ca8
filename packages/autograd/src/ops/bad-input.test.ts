import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import {
  AutogradArgumentError,
  add,
  concat,
  crossEntropy,
  embedding,
  indexSelect,
  layerNorm,
  linear,
  matmul,
  mse,
  mul,
  permute,
  reshape,
  tensor,
  zeros,
} from '../index.js';

/** Shape and label errors are AutogradArgumentErrors naming the op and the shapes, raised before tfjs runs. */
describe('bad input gets an AutogradArgumentError', () => {
  const t23 = () => tensor([1, 2, 3, 4, 5, 6], [2, 3]);

  it('matmul with mismatched inner dims or batch dims', () => {
    expect(() => matmul(t23(), t23())).toThrow(AutogradArgumentError);
    expect(() => matmul(t23(), t23())).toThrow(/matmul: inner dimensions of \[2,3\] and \[2,3\] differ \(3 vs 2\)/);
    expect(() => matmul(zeros([2, 2, 3]), zeros([3, 3, 4]))).toThrow(
      /matmul of \[2,2,3\] and \[3,3,4\], batch dims.*cannot be broadcast/,
    );
    expect(matmul(t23(), t23(), { transposeB: true }).shape).toEqual([2, 2]);
    expect(matmul(t23(), t23(), { transposeA: true }).shape).toEqual([3, 3]);
    expect(matmul(zeros([5, 2, 3]), zeros([1, 3, 4])).shape).toEqual([5, 2, 4]);
  });

  it('linear and layerNorm with weights that do not fit the input', () => {
    expect(() => linear(zeros([2, 3]), zeros([4, 5]))).toThrow(
      /linear: input \[2,3\], weight \[4,5\] and bias \[\] do not fit/,
    );
    expect(() => linear(zeros([2, 3]), zeros([4, 3]), zeros([3]))).toThrow(AutogradArgumentError);
    expect(() => linear(zeros([2, 3]), zeros([3]))).toThrow(AutogradArgumentError);
    expect(() => layerNorm(zeros([2, 3]), zeros([4]))).toThrow(
      /layerNorm: weight \[4\] must match the normalised dims \[3\] of x \[2,3\]/,
    );
    expect(() => layerNorm(zeros([2, 3]), zeros([3]), zeros([2]))).toThrow(/layerNorm: bias \[2\]/);
    expect(() => layerNorm(zeros([3]), null, null, { normalizedDims: 2 })).toThrow(
      /cannot normalise the last 2 dims of x \[3\]/,
    );
    expect(linear(zeros([2, 3]), zeros([4, 3]), zeros([4])).shape).toEqual([2, 4]);
  });

  it('elementwise ops on shapes that do not broadcast', () => {
    expect(() => add(t23(), tensor([1, 2, 3, 4], [4]))).toThrow(/add: shapes \[2,3\] and \[4\] cannot be broadcast/);
    expect(() => mul(zeros([2, 3]), zeros([3, 1]))).toThrow(AutogradArgumentError);
    expect(add(zeros([2, 1, 4]), zeros([3, 1])).shape).toEqual([2, 3, 4]);
    expect(add(t23(), 1).shape).toEqual([2, 3]);
  });

  it('reshape to a different number of elements', () => {
    expect(() => reshape(t23(), [4])).toThrow(/reshape: cannot reshape \[2,3\] \(6 elements\) to \[4\]/);
    expect(() => reshape(t23(), [-1, -1])).toThrow(AutogradArgumentError);
    expect(() => reshape(t23(), [4, -1])).toThrow(AutogradArgumentError);
    expect(reshape(t23(), [3, -1]).shape).toEqual([3, 2]);
    expect(reshape(zeros([0, 3]), [-1, 3]).shape).toEqual([0, 3]);
    // torch: "the unspecified dimension size -1 can be any value"; tfjs's was an untyped error
    expect(() => reshape(zeros([0, 3]), [0, -1])).toThrow(/reshape: .*the -1 dim could be any size/);
  });

  it('concat of tensors whose other dims differ, of other ranks, of 0-d tensors (tfjs: untyped errors)', () => {
    expect(() => concat([zeros([2, 3]), zeros([2, 4])], 0)).toThrow(
      /concat: tensor 1 is \[2,4\] and tensor 0 \[2,3\]: sizes must match except in dim 0/,
    );
    expect(() => concat([zeros([2, 3]), zeros([2, 3, 1])], 1)).toThrow(AutogradArgumentError);
    expect(() => concat([zeros([2, 3]), zeros([0])], 0)).toThrow(AutogradArgumentError);
    expect(() => concat([tensor(1, []), tensor(2, [])])).toThrow(/concat: a 0-d tensor cannot be concatenated/);
    expect(concat([zeros([2, 3]), zeros([2, 4])], 1).shape).toEqual([2, 7]);
  });

  it('mse with input and target shapes that do not broadcast', () => {
    expect(() => mse(t23(), tensor([1, 2, 3, 4, 5, 6], [3, 2]))).toThrow(
      /mse \(input, target\): shapes \[2,3\] and \[3,2\]/,
    );
  });

  it('crossEntropy with a label out of range, from an array or a tensor', () => {
    const logits = () => tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    expect(() => crossEntropy(logits(), [0, 9])).toThrow(/crossEntropy: label 9 is out of range for 3 classes/);
    expect(() => crossEntropy(logits(), tf.tensor1d([-2, 1], 'int32'))).toThrow(AutogradArgumentError);
    expect(crossEntropy(logits(), [-100, 2]).shape).toEqual([]);
    expect(crossEntropy(logits(), [7, 2], { ignoreIndex: 7 }).shape).toEqual([]);
  });

  // a config read from JSON passes TypeScript's checks with any key
  it('crossEntropy and mse with options they do not have (torch spellings, label smoothing, class weights)', () => {
    const logits = () => tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    const config = (json: string) => JSON.parse(json);
    expect(() => crossEntropy(logits(), [0, 2], config('{ "ignore_index": 0 }'))).toThrow(
      /crossEntropy: unknown option "ignore_index"; did you mean ignoreIndex\?/,
    );
    expect(() => crossEntropy(logits(), [0, 2], config('{ "labelSmoothing": 0.1 }'))).toThrow(
      /"labelSmoothing" \(ddp does not have it\)/,
    );
    const weighted = config('{ "weight": [1, 2, 3], "reduction": "sum" }');
    expect(() => crossEntropy(logits(), [0, 2], weighted)).toThrow(AutogradArgumentError);
    expect(() => mse(t23(), t23(), config('{ "size_average": false }'))).toThrow(/mse: unknown option "size_average"/);
  });

  // A cast to int32 would truncate 1.5 to 1 and pick a row or class nobody asked for, silently.
  it('fractional indices and labels, from an array, a float tensor or a Tensor', () => {
    const table = tensor([1, 2, 3, 4], [2, 2]);
    expect(() => embedding([1.5], table)).toThrow(/embedding: index 1.5 is not an integer/);
    expect(() => embedding(tensor([0, 0.5], [2]), table)).toThrow(AutogradArgumentError);
    expect(() => indexSelect(table, 0, [[0.25]])).toThrow(/indexSelect: index 0.25 is not an integer/);
    const labels = tf.tensor1d([1.5]);
    expect(() => crossEntropy(tensor([1, 2, 3], [1, 3]), labels)).toThrow(/crossEntropy: index 1.5/);
    labels.dispose();
    expect(embedding(tf.tensor1d([1, 0]), table).shape).toEqual([2, 2]);
  });

  // probe AS: a ragged list was a RangeError from inside tfjs; 3-deep ids refused as "index 0,2 is not an integer";
  // int32 data taken on a leaf requiring grad (backward then advised casting to int32); a fractional permutation taken
  it('ragged id lists, int32 data on a leaf requiring grad, a fractional permutation; ids of any depth taken', () => {
    const table = tensor([1, 2, 3, 4, 5, 6], [3, 2]);
    expect(() => embedding([[0, 1], [2]], table)).toThrow(/embedding: ids is ragged: .*\(2, 1\)/);
    expect(() => indexSelect(table, 0, [[0, 1], [2]] as number[][])).toThrow(AutogradArgumentError);
    expect(embedding([[[0, 2]], [[1, 1]]] as unknown as number[][], table).shape).toEqual([2, 1, 2, 2]);
    const leaf = tensor([1, 2], [2], { requiresGrad: true });
    expect(() => {
      leaf.data = tf.tensor1d([1, 2], 'int32');
    }).toThrow(/only float32 tensors can require grad: data of int32/);
    expect(() => permute(table, [0.5, 1])).toThrow(/permute: \[0.5,1\] is not a permutation of 2 dims/);
  });

  it('indices and labels beyond int32 (2^32 + 1, 2^32 − 100), as lists or float tensors, and typed arrays', () => {
    const table = tensor([1, 2, 3, 4, 5, 6], [3, 2]);
    // were wrapped by the int32 cast: row 1, row 2, row 0, and label 2^32 − 100 taken as ignoreIndex −100
    expect(() => embedding([2 ** 32 + 1], table)).toThrow('embedding: index 4294967297 is out of range');
    expect(() => indexSelect(table, 0, [2 ** 32 + 2])).toThrow(/indexSelect: index 4294967298 is out of range/);
    const big = tf.tensor1d([2 ** 32]);
    expect(() => embedding(big, table)).toThrow(/embedding: index 4294967296 is out of range/);
    big.dispose();
    expect(() => crossEntropy(tensor([1, 2, 3, 4, 5, 6], [2, 3]), [2 ** 32 - 100, 0])).toThrow(
      /crossEntropy: index 4294967196 is out of range/,
    );
    expect(() => crossEntropy(tensor([1, 2, 3], [1, 3]), [-(2 ** 32) + 2])).toThrow(AutogradArgumentError);
    expect(() => embedding(Int32Array.of(0, 1) as unknown as number[], table)).toThrow(
      'embedding: indices must be a list, an int32 tf.Tensor or a Tensor, got Int32Array',
    );
  });

  it('an embedding table that is not 2-D, a permutation naming a dim past the rank (were tfjs errors)', () => {
    expect(() => embedding([0], tensor([1, 2, 3], [3]))).toThrow('embedding: the table must be [rows, dim], got [3]');
    expect(() => embedding([0], tensor([1, 2, 3, 4], [1, 2, 2]))).toThrow(AutogradArgumentError);
    expect(() => permute(tensor([1, 2, 3, 4], [2, 2]), [1, 2])).toThrow(
      'permute: [1,2] is not a permutation of 2 dims',
    );
  });

  it('indices outside the table, with no tensor left behind', () => {
    const table = tensor([1, 2, 3, 4, 5, 6], [3, 2]);
    const before = tf.memory().numTensors;
    expect(() => embedding([0, 3], table)).toThrow(/embedding: index 3 is out of range for 3 rows/);
    expect(() => embedding(tf.tensor1d([-1], 'int32'), table)).toThrow(AutogradArgumentError);
    expect(() => indexSelect(table, 1, [2])).toThrow(/indexSelect: index 2 is out of range for 2 rows/);
    expect(tf.memory().numTensors).toBe(before + 1); // the int32 ids tensor made inline above
    expect(indexSelect(table, -1, [1, 1]).shape).toEqual([3, 2]);
  });

  it('indexSelect of a 0-d tensor: the vector of one torch makes of it, value and gradient', async () => {
    const x = tensor(5, [], { requiresGrad: true });
    const y = indexSelect(x, 0, [0]);
    expect(y.shape).toEqual([]);
    expect(y.item()).toBe(5);
    await y.backward();
    expect(x.grad?.dataSync()[0]).toBe(1);
    expect(() => indexSelect(tensor(5, []), 0, [1])).toThrow(AutogradArgumentError);
    expect(() => indexSelect(tensor(5, []), 0, [0, 0])).toThrow(/a 0-d tensor takes one index, got 2/);
  });

  // probe X: an async forward (FSDP's, tensor-parallel layers') not awaited, fed to a loss: an untyped TypeError
  it('a Promise where a Tensor goes: refused, saying to await it', () => {
    const pending = Promise.resolve(t23()) as unknown as ReturnType<typeof t23>;
    expect(() => mse(pending, t23())).toThrow(/mse: argument 0 is a Promise, not a Tensor: await the call/);
    expect(() => crossEntropy(pending, [0, 1])).toThrow(AutogradArgumentError);
    expect(() => add(t23(), pending)).toThrow(/argument 1 is a Promise/);
    expect(() => t23().mul(pending)).toThrow(AutogradArgumentError);
  });
});

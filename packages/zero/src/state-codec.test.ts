import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { packState, unpackState } from './state-codec.js';

describe('packState / unpackState', () => {
  it('round-trips scalars and tensors by global parameter index', () => {
    const expAvg = tf.tensor([1.5, -2, 3.25, 4], [2, 2]);
    const momentum = tf.tensor([7], [1]);
    const { meta, values } = packState([
      [3, { step: 5, expAvg }],
      [0, { momentumBuffer: momentum }],
    ]);
    expect(values.length).toBe(5);
    const back = unpackState(meta, values);
    expect([...back.keys()].sort()).toEqual([0, 3]);
    expect(back.get(3)!.step).toBe(5);
    const got = back.get(3)!.expAvg as tf.Tensor;
    expect(got.shape).toEqual([2, 2]);
    expect([...got.dataSync()]).toEqual([1.5, -2, 3.25, 4]);
    expect([...(back.get(0)!.momentumBuffer as tf.Tensor).dataSync()]).toEqual([7]);
    tf.dispose([expAvg, momentum, got, back.get(0)!.momentumBuffer as tf.Tensor]);
  });

  it('packs a rank that owns nothing as an empty map', () => {
    const { meta, values } = packState([]);
    expect(values.length).toBe(0);
    expect(unpackState(meta, values).size).toBe(0);
  });
});

import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { CollateError, createCollate, defaultCollate } from './index.js';

// torch keeps float64 samples float64; ddp collates floats to float32, where a finite value
// beyond ±3.4e38 became ±Infinity silently (the loss then Inf or NaN). Now refused, as int32's wrap.
describe('collating values float32 cannot hold', () => {
  it('refuses a number or a Float64Array value that would overflow to Infinity, leaking nothing', () => {
    const before = tf.memory().numTensors;
    expect(() => defaultCollate([{ y: 0.5 }, { y: 3e39 }])).toThrow(
      /batch\.y: sample 1 is 3e\+39, which float32 cannot hold/,
    );
    expect(() => createCollate({ numberDtype: 'float32' })([1, -1e300])).toThrow(CollateError);
    expect(() => defaultCollate([{ x: Float64Array.of(1, 2) }, { x: Float64Array.of(1, -4e38) }])).toThrow(
      /batch\.x: sample 1 holds -4e\+38, which float32 cannot hold/,
    );
    expect(tf.memory().numTensors).toBe(before);
  });

  it('keeps what float32 holds: Infinity and NaN given as such, tiny values rounding to 0, the largest float32', () => {
    const batch = defaultCollate([Float64Array.of(Number.POSITIVE_INFINITY, Number.NaN, 1e-50, 3.4028234663852886e38)]);
    expect(Array.from(batch.dataSync())).toEqual([Number.POSITIVE_INFINITY, Number.NaN, 0, 3.4028234663852886e38]);
    batch.dispose();
  });
});

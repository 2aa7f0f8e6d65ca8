import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { DigitPairs, partner } from './data.js';

describe('DigitPairs.batch', () => {
  it('puts image i left and its partner right, each pixel byte / 255, with both digits as tokens', () => {
    // a synthetic MNIST of 7 images: pixel p of image n is (31·n + p) mod 256, label n mod 10
    const count = 7;
    const images = Uint8Array.from({ length: count * 784 }, (_, k) => (31 * Math.floor(k / 784) + (k % 784)) % 256);
    const labels = Uint8Array.from({ length: count }, (_, n) => n % 10);
    const pairs = new DigitPairs({ images, labels, count, rows: 28, cols: 28 });
    const ids = [3, 0, 6];
    const { images: batch, tokens } = pairs.batch(ids);
    expect(batch.shape).toEqual([3, 1, 28, 56]);
    const got = batch.dataSync();
    ids.forEach((i, b) => {
      const j = partner(i, count);
      expect(Array.from(tokens.dataSync().slice(2 * b, 2 * b + 2))).toEqual([labels[i], labels[j]]);
      for (let y = 0; y < 28; y++)
        for (let x = 0; x < 56; x++) {
          const [n, col] = x < 28 ? [i, x] : [j, x - 28];
          expect(got[b * 28 * 56 + y * 56 + x]).toBe(Math.fround(images[n * 784 + y * 28 + col] / 255));
        }
    });
    tf.dispose([batch, tokens]);
  });
});

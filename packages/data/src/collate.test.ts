import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { createCollate, defaultCollate } from './collate.js';
import { CollateError, DataArgumentError } from './errors.js';

describe('defaultCollate', () => {
  it('numbers: int32 labels, float32 values', () => {
    const labels = defaultCollate([3, 1, 4]);
    expect(labels.dtype).toBe('int32');
    expect(labels.shape).toEqual([3]);
    expect(Array.from(labels.dataSync())).toEqual([3, 1, 4]);
    const values = defaultCollate([0.5, 1, 2]);
    expect(values.dtype).toBe('float32');
    const forced = createCollate({ numberDtype: 'float32' })([1, 2]);
    expect(forced.dtype).toBe('float32');
    tf.dispose([labels, values, forced]);
  });

  it("refuses a numberDtype it does not have, or a misspelt option (torch's 'int64' fell through to 'auto')", () => {
    expect(() => createCollate({ numberDtype: 'int64' as 'int32' })).toThrow(
      /createCollate: numberDtype must be one of 'auto', 'float32', 'int32', got "int64"/,
    );
    expect(() => createCollate({ number_dtype: 'float32' } as never)).toThrow(DataArgumentError);
  });

  it('typed arrays and NDArrays stack to [B, ...shape] with their dtype family', () => {
    const f = defaultCollate([Float32Array.of(1, 2), Float32Array.of(3, 4), Float32Array.of(5, 6)]);
    expect(f.shape).toEqual([3, 2]);
    expect(f.dtype).toBe('float32');
    expect(Array.from(f.dataSync())).toEqual([1, 2, 3, 4, 5, 6]);
    const u = defaultCollate([Uint8Array.of(255, 0), Uint8Array.of(7, 8)]);
    expect(u.dtype).toBe('int32');
    expect(Array.from(u.dataSync())).toEqual([255, 0, 7, 8]);
    const img = defaultCollate([
      { data: new Float32Array(6).fill(1), shape: [2, 3] },
      { data: new Float32Array(6).fill(2), shape: [2, 3] },
    ]);
    expect(img.shape).toEqual([2, 2, 3]);
    tf.dispose([f, u, img]);
  });

  it('nested objects and tuples keep their structure', () => {
    const batch = defaultCollate([
      { x: [Float64Array.of(1, 2), 0], meta: { id: 'a', ok: true } },
      { x: [Float64Array.of(3, 4), 1], meta: { id: 'b', ok: false } },
    ]);
    const [x, y] = batch.x;
    expect(x.shape).toEqual([2, 2]);
    expect(x.dtype).toBe('float32');
    expect(y.dtype).toBe('int32');
    expect(batch.meta.id).toEqual(['a', 'b']);
    expect(batch.meta.ok.dtype).toBe('bool');
    tf.dispose(batch);
  });

  it('stacks tensors and consumes them', () => {
    const before = tf.memory().numTensors;
    const batch = defaultCollate([tf.ones([2, 2]), tf.zeros([2, 2])]);
    expect(batch.shape).toEqual([2, 2, 2]);
    batch.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  // probe CA: a dataset handing out tensors it keeps (torch's TensorDataset) failed in its second epoch inside tfjs
  it('a disposed tensor sample (consumed by an earlier batch) is a CollateError saying to clone it', () => {
    const kept = tf.ones([2]);
    defaultCollate([kept, tf.zeros([2])]).dispose();
    expect(() => defaultCollate([tf.zeros([2]), kept])).toThrow(/sample 1 is a disposed tensor: .*clone one/);
  });

  it('mismatched samples raise CollateError naming the field, and leak nothing', () => {
    const before = tf.memory().numTensors;
    const bad = [
      { a: 1, b: Float32Array.of(1, 2) },
      { a: 2, b: Float32Array.of(1, 2, 3) },
    ];
    expect(() => defaultCollate(bad)).toThrow(/batch\.b: sample 1 has shape \[3\]/);
    expect(() => defaultCollate([{ a: 1 }, { c: 1 }] as { a?: number; c?: number }[])).toThrow(CollateError);
    expect(() => defaultCollate([[1, 2], [1]])).toThrow(CollateError);
    expect(() => defaultCollate([1, 'x'] as (number | string)[])).toThrow(CollateError);
    expect(() => defaultCollate([Float32Array.of(1), Int32Array.of(1)] as Float32Array[])).toThrow(CollateError);
    expect(() => defaultCollate([])).toThrow(CollateError);
    expect(() => defaultCollate([Uint32Array.of(2 ** 31)])).toThrow(/above int32/);
    // numbers int32 cannot hold: were wrapped (3e9 → -1294967296) or truncated (2.5 → 2) silently
    expect(() => defaultCollate([{ id: 1 }, { id: 3e9 }])).toThrow(/batch\.id: sample 1 is 3000000000, which int32/);
    expect(() => defaultCollate([-(2 ** 31) - 1])).toThrow(CollateError);
    expect(() => createCollate({ numberDtype: 'int32' })([1, 2.5])).toThrow(/sample 1 is 2\.5/);
    const edge = defaultCollate([-(2 ** 31), 2 ** 31 - 1]);
    expect(Array.from(edge.dataSync())).toEqual([-(2 ** 31), 2 ** 31 - 1]);
    edge.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('refuses what it cannot collate: a Date, Map or class instance became {}, silently (torch raises)', () => {
    class Record {
      #id = 1;
      get id() {
        return this.#id;
      }
    }
    expect(() => defaultCollate([new Date(1), new Date(2)])).toThrow(/batch: cannot collate a Date/);
    expect(() => defaultCollate([new Map([[1, 2]]), new Map()])).toThrow(/batch: cannot collate a Map/);
    expect(() => defaultCollate([{ r: new Record() }, { r: new Record() }])).toThrow(
      /batch\.r: cannot collate a Record/,
    );
    const bareRecord = (y: number): { y: number } => Object.assign(Object.create(null), { y });
    const bare = defaultCollate([bareRecord(1), bareRecord(2)]);
    expect(Array.from(bare.y.dataSync())).toEqual([1, 2]);
    bare.y.dispose();
  });

  it('mismatched tensors, int64 arrays and bad NDArray shapes are CollateErrors naming the sample (were untyped)', () => {
    const before = tf.memory().numTensors;
    expect(() => defaultCollate([{ x: tf.ones([2]) }, { x: tf.ones([3]) }])).toThrow(
      /batch\.x: sample 1 is a float32 tensor of shape \[3\], sample 0 a float32 of \[2\]/,
    );
    expect(() => defaultCollate([tf.ones([2], 'int32'), tf.ones([2])])).toThrow(/sample 1 is a float32 tensor/);
    expect(() => defaultCollate([BigInt64Array.of(1n)] as unknown as Int32Array[])).toThrow(
      /batch: sample 0 is a BigInt64Array, which no tensor dtype holds/,
    );
    expect(() => defaultCollate([new DataView(new ArrayBuffer(4))] as unknown as Int32Array[])).toThrow(CollateError);
    for (const shape of [
      [-2, -3],
      [2.5, 2.4],
    ]) {
      expect(() => defaultCollate([{ data: new Float32Array(6), shape }])).toThrow(/non-negative integers/);
    }
    expect(tf.memory().numTensors).toBe(before);
  });
});

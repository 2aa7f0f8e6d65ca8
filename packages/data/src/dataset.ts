import { tf } from '@ddp/tensor';
import { isPlainObject } from './collate.js';
import { checkIndex } from './errors.js';
import { startPass } from './one-shot.js';

/** A map-style dataset: a known length and random access by index (torch.utils.data.Dataset). */
export abstract class Dataset<T> {
  abstract get length(): number;
  /** The sample at `index` in [0, length); may return a promise (I/O-bound datasets). */
  abstract getItem(index: number): T | Promise<T>;
}

/**
 * Map-style by shape, as torch takes any object with __len__ and __getitem__: a plain object, or a
 * Dataset from another copy of this package, passes where `instanceof Dataset` would not.
 */
export function isMapDataset<T>(x: unknown): x is Dataset<T> {
  return (
    typeof x === 'object' &&
    x !== null &&
    typeof (x as { getItem?: unknown }).getItem === 'function' &&
    typeof (x as { length?: unknown }).length === 'number'
  );
}

/**
 * A dataset over samples already in memory (torch's TensorDataset too). Tensors in a sample are
 * handed out as clones, which share the data: collation consumes (disposes) what it is given, and
 * an epoch disposed the array's own tensors, so the next failed.
 */
export class ArrayDataset<T> extends Dataset<T> {
  constructor(private readonly items: readonly T[]) {
    super();
  }
  get length(): number {
    return this.items.length;
  }
  getItem(index: number): T {
    checkIndex('ArrayDataset', index, this.items.length);
    return withClonedTensors(this.items[index]!);
  }
}

/** x with each tensor in its arrays and plain objects cloned; x itself (no rebuild) when it holds none. */
function withClonedTensors<T>(x: T): T {
  if (x instanceof tf.Tensor) return tf.clone(x) as T;
  if (!Array.isArray(x) && !isPlainObject(x)) return x;
  const entries = Object.entries(x).map(([k, v]) => [k, withClonedTensors(v)] as const);
  if (entries.every(([k, v]) => v === (x as Record<string, unknown>)[k])) return x;
  return (Array.isArray(x) ? entries.map(([, v]) => v) : Object.fromEntries(entries)) as T;
}

/** A stream of samples of unknown length (torch.utils.data.IterableDataset). */
export abstract class IterableDataset<T> implements AsyncIterable<T> {
  abstract [Symbol.asyncIterator](): AsyncIterator<T>;
}

/** An IterableDataset over any (async) iterable, re-iterated on each epoch by calling `source()`. */
export class GeneratorDataset<T> extends IterableDataset<T> {
  constructor(private readonly source: () => Iterable<T> | AsyncIterable<T>) {
    super();
  }
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    const stream = this.source();
    startPass(stream, 'GeneratorDataset'); // source() handing back one generator made once
    yield* stream;
  }
}

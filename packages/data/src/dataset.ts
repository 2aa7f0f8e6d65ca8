import { startPass } from './one-shot.js';

/** A map-style dataset: a known length and random access by index (torch.utils.data.Dataset). */
export abstract class Dataset<T> {
  abstract get length(): number;
  /** The sample at `index` in [0, length); may return a promise (I/O-bound datasets). */
  abstract getItem(index: number): T | Promise<T>;
}

/** A dataset over samples already in memory. */
export class ArrayDataset<T> extends Dataset<T> {
  constructor(private readonly items: readonly T[]) {
    super();
  }
  get length(): number {
    return this.items.length;
  }
  getItem(index: number): T {
    return this.items[index]!;
  }
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

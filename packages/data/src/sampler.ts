import { DataArgumentError } from './errors.js';
import { Generator } from './generator.js';

/** Yields dataset indices; `length` is how many one epoch yields. */
export interface Sampler extends Iterable<number> {
  readonly length: number;
  /** Samplers whose order depends on the epoch (DistributedSampler) implement this. */
  setEpoch?(epoch: number): void;
}

export function checkLength(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new DataArgumentError(`${what} must be a non-negative integer, got ${n}`);
  }
}

/** 0, 1, …, n-1. */
export class SequentialSampler implements Sampler {
  constructor(readonly length: number) {
    checkLength(length, 'SequentialSampler length');
  }
  *[Symbol.iterator](): Iterator<number> {
    for (let i = 0; i < this.length; i++) yield i;
  }
}

/**
 * A fresh permutation of 0..n-1 each epoch, drawn from a seeded generator that advances
 * from one epoch to the next (torch's RandomSampler with a generator): the same seed gives
 * the same sequence of orders on every rank.
 */
export class RandomSampler implements Sampler {
  readonly generator: Generator;
  constructor(
    readonly length: number,
    opts: { seed?: number; generator?: Generator } = {},
  ) {
    checkLength(length, 'RandomSampler length');
    this.generator = opts.generator ?? new Generator(opts.seed ?? 0);
  }
  *[Symbol.iterator](): Iterator<number> {
    yield* this.generator.randperm(this.length);
  }
}

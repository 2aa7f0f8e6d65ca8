import { describe, expect, it } from 'vitest';
import { GlobalBatchSampler } from './batches.js';

describe('GlobalBatchSampler', () => {
  it('refuses a global batch larger than the dataset (was: a "seed NaN" error at the first batch)', () => {
    expect(() => new GlobalBatchSampler(100, 101, 0, 2, 0)).toThrow(
      'global batch 101 is larger than the 100 training samples',
    );
    expect(new GlobalBatchSampler(100, 100, 0, 2, 0).batchesPerEpoch).toBe(1);
  });
});

import { describe, expect, it } from 'vitest';
import { onMainThread } from './op-dispatcher.js';

describe('onMainThread', () => {
  it('keeps small all-to-all-shaped collectives on the main thread, large ones and others on the comm thread', () => {
    expect(onMainThread('allReduce', 4096, 2)).toBe(true);
    expect(onMainThread('allReduce', 8192, 3)).toBe(true);
    expect(onMainThread('allReduce', 8193, 3)).toBe(false);
    expect(onMainThread('broadcast', 4096, 2)).toBe(false);
  });

  it('runs every size on the main thread in a group of one (nothing travels)', () => {
    expect(onMainThread('allReduce', 64 * 1024 * 1024, 1)).toBe(true);
    expect(onMainThread('allGatherInto', 64 * 1024 * 1024, 1)).toBe(true);
  });
});

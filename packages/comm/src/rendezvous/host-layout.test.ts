import { describe, expect, it } from 'vitest';
import { hostLayout } from './host-layout.js';

describe('hostLayout', () => {
  it('pairs each local rank with the ranks of the same local index on the other hosts', () => {
    const ids = ['a', 'b', 'a', 'b', 'a', 'b'];
    const grid = [
      [0, 2, 4],
      [1, 3, 5],
    ];
    expect(hostLayout(ids, 0)).toEqual({ local: [0, 2, 4], across: [0, 1], grid });
    expect(hostLayout(ids, 4)).toEqual({ local: [0, 2, 4], across: [4, 5], grid });
    expect(hostLayout(['x', 'x', 'y', 'y'], 3)).toEqual({
      local: [2, 3],
      across: [1, 3],
      grid: [
        [0, 1],
        [2, 3],
      ],
    });
  });

  it('does not apply to one host, one rank per host, or uneven hosts', () => {
    expect(hostLayout(['a', 'a', 'a'], 1)).toBeNull();
    expect(hostLayout(['a', 'b', 'c'], 1)).toBeNull();
    expect(hostLayout(['a', 'a', 'b'], 0)).toBeNull();
  });
});

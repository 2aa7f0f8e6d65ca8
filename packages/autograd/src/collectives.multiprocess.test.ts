import { runWorld } from '@ddp/launch/testing';
import { describe, it } from 'vitest';
import { runCases } from './test/collective-cases.js';
import { fakeWorld } from './test/fake-process-group.js';
import { expectAllClose } from './test/utils.js';

const WORLD = 2;

describe('differentiable collectives across real processes', () => {
  it('give the same input gradients as the in-process fake group', async () => {
    const expected = await Promise.all(fakeWorld(WORLD).map((g) => runCases(g)));
    const { results: ranks } = await runWorld<{ rank: number; grads: Record<string, number[]> }>({
      script: new URL('./test/collectives.child.ts', import.meta.url),
      nprocs: WORLD,
    });
    for (const { rank, grads } of ranks) {
      for (const [name, want] of Object.entries(expected[rank])) expectAllClose(grads[name], want, 5);
    }
  }, 90_000);
});

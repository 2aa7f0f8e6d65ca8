import { explain, spawnRanks } from '@ddp/launch/testing';
import { afterEach, describe, expect, it } from 'vitest';
import {
  destroyProcessGroup,
  getDefaultGroup,
  getRank,
  getWorldSize,
  HashStore,
  InvalidArgumentError,
  initProcessGroup,
  isInitialized,
  NotInitializedError,
  newGroup,
  type ProcessGroup,
} from '../index.js';

afterEach(async () => {
  await destroyProcessGroup();
});

describe('a world of one in this process (HashStore)', () => {
  it('initialises, runs collectives on the worker thread, and destroys', async () => {
    expect(isInitialized()).toBe(false);
    expect(() => getDefaultGroup()).toThrow(NotInitializedError);
    const pg = await initProcessGroup({ store: new HashStore(), rank: 0, worldSize: 1, timeoutMs: 10_000 });
    expect(isInitialized()).toBe(true);
    expect([getRank(), getWorldSize(), pg.ranks]).toEqual([0, 1, [0]]);
    const a = new Float32Array([1, 2, 3]);
    const w1 = pg.allReduce(a, { op: 'avg' });
    const gathered = pg.allGather(new Int32Array([4, 5]));
    await w1.wait();
    expect([...a]).toEqual([1, 2, 3]);
    expect((await gathered.wait()).map((x) => [...x])).toEqual([[4, 5]]);
    const out = new Float64Array(2);
    await pg.reduceScatter(out, new Float64Array([7, 8])).wait();
    expect([...out]).toEqual([7, 8]);
    await pg.barrier().wait();
    await destroyProcessGroup();
    expect(isInitialized()).toBe(false);
  });

  it('needs no store, port or environment for a world of one', async () => {
    const pg = await initProcessGroup({ rank: 0, worldSize: 1 });
    const a = new Int32Array([5]);
    await pg.allReduce(a).wait();
    expect([...a]).toEqual([5]);
  });

  it('rejects bad arguments with a typed error', async () => {
    const pg = await initProcessGroup({ store: new HashStore(), rank: 0, worldSize: 1 });
    expect(() => pg.reduceScatter(new Float32Array(2), new Float32Array(3))).toThrow(/reduceScatter/);
    expect(() => pg.broadcast(new Float32Array(2), { src: 1 })).toThrow(/broadcast src 1/);
    // was "broadcast src 0 is not a rank of this group of 1": a string root read as a wrong number
    expect(() => pg.broadcast(new Float32Array(2), { src: '0' as unknown as number })).toThrow(
      "rank 0: broadcast src must be an integer rank, got the string '0'",
    );
    expect(() => pg.reduce(new Float32Array(2), { dst: null as unknown as number })).toThrow(/got object null/);
    expect(() => pg.allReduce(new Uint16Array(2))).toThrow(/float16/);
    expect(() => pg.allReduce(new Float32Array(2), { op: 'median' as 'sum' })).toThrow(InvalidArgumentError);
    expect(() => pg.reduceScatter(new Float32Array(1), new Float32Array(1), { op: 'median' as 'sum' })).toThrow(
      /unknown reduce op "median"/,
    );
    // a config's 'false' was truthy: the caller's input overwritten where it was meant kept
    const shared = new Float32Array(new SharedArrayBuffer(8));
    expect(() => pg.reduceScatter(new Float32Array(2), shared, { overwriteInput: 'false' as never })).toThrow(
      'reduceScatter: overwriteInput must be a boolean, got "false"',
    );
    // ignored before: a ported `reduce_op` summed, torch's `async_op` and `group` keywords did nothing
    expect(() => pg.allReduce(new Float32Array(2), { reduce_op: 'max' } as never)).toThrow(
      'rank 0: allReduce: unknown option "reduce_op" (ddp does not have it); its options are op, dtype',
    );
    expect(() => pg.broadcast(new Float32Array(2), { src: 0, async_op: true } as never)).toThrow(
      /unknown option "async_op"/,
    );
    expect(() => pg.barrier()).not.toThrow();
    await expect(newGroup([0], { timeout: 5 } as never)).rejects.toThrow(/newGroup: unknown option "timeout"/);
  });

  it('getRank(null) and getWorldSize(null) are -1 (a non-member), newGroup refuses repeated ranks', async () => {
    // before: the world's rank and size, and newGroup([0, 0]) made the group [0]
    await initProcessGroup({ rank: 0, worldSize: 1 });
    expect([getRank(null), getWorldSize(null), getRank(), getWorldSize(undefined)]).toEqual([-1, -1, 0, 1]);
    await expect(newGroup([0, 0])).rejects.toThrow(InvalidArgumentError);
    await expect(newGroup([0, 0])).rejects.toThrow(/must be distinct/);
    expect(getWorldSize((await newGroup([0])) as ProcessGroup)).toBe(1);
  });

  it('a second initProcessGroup names the rank (was: a CommError with no rank), as torch refuses it', async () => {
    await initProcessGroup({ rank: 0, worldSize: 1 });
    const again = initProcessGroup({ rank: 0, worldSize: 1 });
    await expect(again).rejects.toThrow(
      'rank 0: initProcessGroup: already initialised (call destroyProcessGroup first)',
    );
    await expect(again).rejects.toMatchObject({ rank: 0, op: 'initProcessGroup' });
  });

  it('refuses an option it does not know (was: `world_size` ignored, WORLD_SIZE read from the environment)', async () => {
    await expect(initProcessGroup({ rank: 0, world_size: 1 } as never)).rejects.toThrow(
      'initProcessGroup: unknown option "world_size"; did you mean worldSize?',
    );
  });

  it('rejects a timeout that is not positive before forming the world', async () => {
    await expect(initProcessGroup({ rank: 0, worldSize: 1, timeoutMs: -5 })).rejects.toThrow(InvalidArgumentError);
    await expect(initProcessGroup({ rank: 0, worldSize: 1, timeoutMs: Number.NaN })).rejects.toThrow(/timeoutMs/);
    expect(isInitialized()).toBe(false);
  });
});

describe('timeouts past what a Node timer holds (2^31 ms)', () => {
  it.each([Number.POSITIVE_INFINITY, 2 ** 31])(
    'timeoutMs %s: 2 ranks, one 300 ms late at every step, succeed',
    async (t) => {
      // before: Node fired these timers after 1 ms, so rank 0 raised CommTimeoutError at the first wait
      const out = await spawnRanks({
        nprocs: 2,
        script: new URL('../test/long-timeout.child.ts', import.meta.url),
        args: [String(t)],
        timeoutMs: 40_000,
      });
      expect(
        out.every((o) => o.code === 0),
        explain(out),
      ).toBe(true);
      expect(out.map((o) => o.results[0])).toEqual([{ sums: [3, 20] }, { sums: [3, 20] }]);
    },
    60_000,
  );
});

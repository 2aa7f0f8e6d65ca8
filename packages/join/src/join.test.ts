import { pendingValueWriter, tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { describe, expect, it } from 'vitest';
import {
  EarlyTerminationError,
  isJoinActive,
  JoinArgumentError,
  type Joinable,
  type JoinHook,
  join,
  notifyJoinContext,
} from './index.js';

/** A world of one: every all-reduce leaves its buffer as is; counts the collectives issued. */
function soloGroup(): ProcessGroup & { issued: number } {
  const done = { promise: Promise.resolve(), wait: () => Promise.resolve() };
  const group = {
    rank: 0,
    size: 1,
    ranks: [0],
    issued: 0,
    allReduce: () => {
      group.issued++;
      return done;
    },
  };
  return group as unknown as ProcessGroup & { issued: number };
}

function recorder(group: ProcessGroup, log: string[]): Joinable {
  return {
    joinProcessGroup: group,
    joinHook: (opts): JoinHook => {
      log.push(`hook ${JSON.stringify(opts)}`);
      return { mainHook: () => void log.push('main'), postHook: (last) => void log.push(`post ${last}`) };
    },
  };
}

describe('join on one rank', () => {
  it('runs fn, then each postHook as last joiner, passing the hook options through', async () => {
    const group = soloGroup();
    const log: string[] = [];
    const a = recorder(group, log);
    const b = recorder(group, log);
    const result = await join(
      [a, b],
      async () => {
        expect(isJoinActive(a)).toBe(true);
        expect(await notifyJoinContext(a)).toBe(1);
        expect(await notifyJoinContext(b)).toBe(null); // not the first joinable: no collective
        return 42;
      },
      { divideByInitialWorldSize: false, syncMaxCount: true },
    );
    expect(result).toBe(42);
    expect(log).toEqual([
      'hook {"divideByInitialWorldSize":false,"syncMaxCount":true}',
      'hook {"divideByInitialWorldSize":false,"syncMaxCount":true}',
      'post true',
      'post true',
    ]);
    expect(group.issued).toBe(2); // one "still active" flag, one join-loop count
    expect(isJoinActive(a)).toBe(false);
  });

  it('outside join and with enable: false, notifyJoinContext does nothing', async () => {
    const group = soloGroup();
    const log: string[] = [];
    const a = recorder(group, log);
    await notifyJoinContext(a);
    await join([a], () => notifyJoinContext(a), { enable: false });
    expect(group.issued).toBe(0);
    expect(log).toEqual([]);
  });

  it('an error thrown by fn propagates without running the hooks', async () => {
    const log: string[] = [];
    const a = recorder(soloGroup(), log);
    await expect(join([a], () => Promise.reject(new RangeError('boom')))).rejects.toThrow('boom');
    expect(log).toEqual([]);
    expect(isJoinActive(a)).toBe(false);
  });

  it('rejects no joinables, repeated ones and mixed process groups with JoinArgumentError', async () => {
    const a = recorder(soloGroup(), []);
    const b = recorder(soloGroup(), []);
    await expect(join([], async () => 0)).rejects.toThrow(JoinArgumentError);
    await expect(join([a, a], async () => 0)).rejects.toThrow('listed twice');
    await expect(join([a, b], async () => 0)).rejects.toThrow('different process group');
    // a config's strings were truthy: `enable: 'false'` joined, `divideByInitialWorldSize: 'false'` divided by it
    for (const name of ['enable', 'throwOnEarlyTermination', 'divideByInitialWorldSize']) {
      await expect(join([a], async () => 0, { [name]: 'false' })).rejects.toThrow(
        `join: ${name} must be a boolean, got "false"`,
      );
    }
  });

  it('EarlyTerminationError names the rank', () => {
    const e = new EarlyTerminationError(3, 'exhausted its inputs first');
    expect(e.name).toBe('EarlyTerminationError');
    expect(e.message).toContain('rank 3');
  });
});

// probe AD: a rank that joins first steps in the shadow loop (ZeRO's hook) after its loop returned; the
// mark was released with the loop, so a save or forward meanwhile (join not awaited) read the weights of before
it("the joinables' writes stay marked until the shadowing ends, not only while the loop runs", async () => {
  let release = () => {};
  const gate = new Promise<void>((r) => (release = r));
  const group = { rank: 0, size: 1, ranks: [0], allReduce: () => ({ wait: () => gate }) } as unknown as ProcessGroup;
  const weight = tensor([1, 2], [2]);
  const joinable: Joinable = { ...recorder(group, []), joinWrites: [weight] };
  let loopDone = false;
  const running = join([joinable], async () => {
    loopDone = true;
  });
  await new Promise((r) => setImmediate(r)); // the loop returned; the shadow loop awaits its all-reduce
  expect(loopDone).toBe(true);
  expect(pendingValueWriter(weight)).toBe('join()');
  release();
  await running;
  expect(pendingValueWriter(weight)).toBe(null);
});

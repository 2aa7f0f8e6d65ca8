import { destroyProcessGroup, initProcessGroup, newGroup } from '@ddp/comm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commGroupFor, holdCommGroup, releaseCommGroup } from './comm-group.js';

beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
});
afterAll(async () => {
  await destroyProcessGroup();
});

/** A wrapper as comm-group.ts sees one: its parameters, alive or freed. */
const wrapper = (freed = false) => ({ params: [{ param: { isDisposed: freed } }] });

describe("the group a DDP wrapper's collectives run on", () => {
  it('the given group alone; beside a live wrapper a duplicate, reused after a dispose (was: one new per wrap)', async () => {
    const group = (await newGroup([0]))!;
    const first = wrapper();
    expect(await commGroupFor(group)).toBe(group);
    holdCommGroup(first, group);
    const second = wrapper();
    const dup = await commGroupFor(group);
    expect([dup === group, dup.ranks]).toEqual([false, group.ranks]);
    holdCommGroup(second, group);
    releaseCommGroup(second, group, dup);
    releaseCommGroup(second, group, dup); // a second dispose gives nothing back twice
    expect(await commGroupFor(group)).toBe(dup);
    expect(await commGroupFor(group)).not.toBe(dup);
    // a wrapper whose module was freed no longer counts
    const freed = wrapper(true);
    const other = (await newGroup([0]))!;
    expect(await commGroupFor(other)).toBe(other);
    holdCommGroup(freed, other);
    expect(await commGroupFor(other)).toBe(other);
    holdCommGroup(wrapper(), other);
    expect(await commGroupFor(other)).not.toBe(other); // the check can fail
  });
});

import { isDeepStrictEqual } from 'node:util';
import {
  allGatherObject,
  broadcastObject,
  destroyProcessGroup,
  gatherObject,
  initProcessGroup,
  newGroup,
  scatterObject,
} from '../index.js';
import { Checker } from './checker.js';

/**
 * The object collectives on 3 ranks (either backend: DDP_COMM_BACKEND): values the structured clone
 * takes, each rank's own, through all four; then a value that cannot be cloned on one rank only (every
 * rank raises, naming it, and the group goes on), and barrier given a timeout (refused, typed).
 * Prints RESULT { checks, failures, errors: the errors' "name: message" per case }.
 */
const g = await initProcessGroup({ timeoutMs: 20_000 });
const c = new Checker();
const sentBy = (r: number) => {
  const cycle: { self?: unknown; r: number } = { r };
  cycle.self = cycle;
  return {
    r,
    map: new Map<string, unknown>([['k', [r, undefined, Number.NaN]]]),
    when: new Date(1_700_000_000_000 + r),
    big: 2n ** 70n + BigInt(r),
    floats: Float64Array.of(-0, Number.POSITIVE_INFINITY, 5e-324 * r),
    text: 'é'.repeat(r * 1000 + 1), // lengths that are not a multiple of 4 bytes
    cycle,
  };
};
const same = (a: unknown, b: unknown) => isDeepStrictEqual(a, b);

const gathered = await allGatherObject(sentBy(g.rank));
c.ok('allGatherObject: every rank value, in rank order', same(gathered, [0, 1, 2].map(sentBy)));
c.ok('allGatherObject: a cycle stays a cycle', (gathered[2].cycle as { self: unknown }).self === gathered[2].cycle);
c.ok('broadcastObject from 1', same(await broadcastObject(g.rank === 1 ? sentBy(1) : null, { src: 1 }), sentBy(1)));
const atTwo = await gatherObject(sentBy(g.rank), { dst: 2 });
c.ok('gatherObject to 2', g.rank === 2 ? same(atTwo, [0, 1, 2].map(sentBy)) : atTwo === null);
const big = 'x'.repeat(5_000_003);
const mine = await scatterObject(g.rank === 0 ? [big, sentBy(1), undefined] : null, { src: 0 });
c.ok('scatterObject from 0', same(mine, [big, sentBy(1), undefined][g.rank]));
// on a subgroup, src and dst are global ranks, as torch's (probe DD: src 1 of [1, 2] was read as its group rank 1)
const pair = await newGroup([1, 2]);
if (pair) {
  c.ok('subgroup broadcastObject from global 2', same(await broadcastObject(g.rank, { src: 2, group: pair }), 2));
  const atOne = await gatherObject(g.rank, { dst: 1, group: pair });
  c.ok('subgroup gatherObject to global 1', same(atOne, g.rank === 1 ? [1, 2] : null));
  const part = await scatterObject(g.rank === 2 ? ['a', 'b'] : null, { src: 2, group: pair });
  c.ok('subgroup scatterObject from global 2', part === (g.rank === 1 ? 'a' : 'b'));
  const outside = await broadcastObject(0, { src: 0, group: pair }).then(
    () => 'none',
    (e: Error) => e.message,
  );
  c.ok('subgroup src outside the group refused', /src 0 is not a rank of the group \[1, 2\]/.test(outside));
}

const errors: Record<string, string> = {};
const attempt = async (name: string, run: () => Promise<unknown>) => {
  try {
    await run();
    errors[name] = 'none';
  } catch (e) {
    errors[name] = `${(e as Error).name}: ${(e as Error).message}`;
  }
};
const fn = () => 0;
await attempt('allGather', () => allGatherObject(g.rank === 1 ? { fn } : g.rank));
await attempt('broadcast', () => broadcastObject(fn, { src: 1 }));
await attempt('gather', () => gatherObject(g.rank === 1 ? fn : 0, { dst: 0 }));
await attempt('scatter', () => scatterObject(g.rank === 0 ? [1, 2] : null, { src: 0 }));
// probe CB: no options object was a TypeError reading its group
await attempt('noOptions', () => (broadcastObject as (v: unknown) => Promise<unknown>)(1));
// the group is still in step: the collectives completed on every rank before they raised
c.ok('after the refusals', same(await allGatherObject(g.rank), [0, 1, 2]));
await attempt('barrier', () => (g.barrier as (o: unknown) => { wait(): Promise<void> })({ timeoutMs: 1000 }).wait());
c.report({ rank: g.rank, errors });
await destroyProcessGroup();

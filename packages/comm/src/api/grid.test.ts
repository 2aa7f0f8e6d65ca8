import { describe, expect, it } from 'vitest';
import { runWorld } from '../test/spawn-world.js';
import { gridGroupLists } from './grid.js';

// Each rank builds the grid, reports its coordinates and neighbours, and sums its global
// rank over the tp, pp and dp groups (so the groups are proven to talk, not just to exist).
const child = (index: string, sizes: string) => `
import { initProcessGroup, destroyProcessGroup, ProcessGroupManager } from '${index}';
const world = await initProcessGroup();
const g = await ProcessGroupManager.create(${sizes});
const sum = async (group) => { const b = new Float32Array([world.rank]); await group.allReduce(b).wait(); return b[0]; };
const out = { rank: world.rank, dp: g.dpRank, pp: g.ppRank, tp: g.tpRank, prev: g.ppPrevRank, next: g.ppNextRank,
  first: g.isFirstStage, last: g.isLastStage, tpRanks: g.tpGroup.ranks, ppRanks: g.ppGroup.ranks, dpRanks: g.dpGroup.ranks,
  tpSum: await sum(g.tpGroup), ppSum: await sum(g.ppGroup), dpSum: await sum(g.dpGroup), at: g.rankAt(g.dpRank, g.ppRank, g.tpRank) };
console.log('RESULT ' + JSON.stringify(out));
await destroyProcessGroup();
`;

const index = new URL('../index.ts', import.meta.url).href;

interface Coords {
  rank: number;
  dp: number;
  pp: number;
  tp: number;
  prev: number | null;
  next: number | null;
  first: boolean;
  last: boolean;
  tpRanks: number[];
  ppRanks: number[];
  dpRanks: number[];
  tpSum: number;
  ppSum: number;
  dpSum: number;
  at: number;
}

async function gridWorld(sizes: string): Promise<Coords[]> {
  const outcomes = await runWorld({
    worldSize: 4,
    script: '',
    nodeArgs: ['--input-type=module', '-e', child(index, sizes)],
    timeoutMs: 45_000,
  });
  return outcomes.map((o) => {
    if (o.code !== 0 || o.results.length !== 1)
      throw new Error(`rank ${o.rank} exited ${o.code}: ${o.stderr.slice(-1500)}`);
    return o.results[0] as Coords;
  });
}

const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);

describe('gridGroupLists', () => {
  it('puts tp ranks adjacent and partitions the world along each axis', () => {
    const l = gridGroupLists(2, 2, 2);
    expect(l.tp).toEqual([
      [0, 1],
      [2, 3],
      [4, 5],
      [6, 7],
    ]);
    expect(l.pp).toEqual([
      [0, 2],
      [1, 3],
      [4, 6],
      [5, 7],
    ]);
    expect(l.dp).toEqual([
      [0, 4],
      [1, 5],
      [2, 6],
      [3, 7],
    ]);
    for (const axis of [l.tp, l.pp, l.dp]) expect(axis.flat().sort((a, b) => a - b)).toEqual([...Array(8).keys()]);
  });
});

describe('ProcessGroupManager over 4 real ranks', () => {
  it('dp 2 × pp 1 × tp 2', async () => {
    const r = await gridWorld('{ dp: 2, tp: 2 }');
    expect(r.map((c) => [c.dp, c.pp, c.tp])).toEqual([
      [0, 0, 0],
      [0, 0, 1],
      [1, 0, 0],
      [1, 0, 1],
    ]);
    for (const c of r) {
      expect(c.at).toBe(c.rank);
      expect([c.prev, c.next, c.first, c.last]).toEqual([null, null, true, true]);
      expect(c.tpSum).toBe(sum(c.tpRanks));
      expect(c.ppRanks).toEqual([c.rank]);
      expect(c.dpRanks).toEqual([c.rank % 2, (c.rank % 2) + 2]);
      expect(c.dpSum).toBe(sum(c.dpRanks));
    }
    expect(r.map((c) => c.tpRanks)).toEqual([
      [0, 1],
      [0, 1],
      [2, 3],
      [2, 3],
    ]);
  }, 60_000);

  it('dp 1 × pp 2 × tp 2', async () => {
    const r = await gridWorld('{ pp: 2, tp: 2 }');
    expect(r.map((c) => [c.dp, c.pp, c.tp])).toEqual([
      [0, 0, 0],
      [0, 0, 1],
      [0, 1, 0],
      [0, 1, 1],
    ]);
    expect(r.map((c) => [c.prev, c.next])).toEqual([
      [null, 2],
      [null, 3],
      [0, null],
      [1, null],
    ]);
    expect(r.map((c) => [c.first, c.last])).toEqual([
      [true, false],
      [true, false],
      [false, true],
      [false, true],
    ]);
    expect(r.map((c) => c.ppRanks)).toEqual([
      [0, 2],
      [1, 3],
      [0, 2],
      [1, 3],
    ]);
    for (const c of r) expect([c.tpSum, c.ppSum, c.dpSum]).toEqual([sum(c.tpRanks), sum(c.ppRanks), c.rank]);
  }, 60_000);

  it('dp 2 × pp 2 × tp 1', async () => {
    const r = await gridWorld('{ dp: 2, pp: 2 }');
    expect(r.map((c) => [c.dp, c.pp, c.tp])).toEqual([
      [0, 0, 0],
      [0, 1, 0],
      [1, 0, 0],
      [1, 1, 0],
    ]);
    expect(r.map((c) => [c.prev, c.next])).toEqual([
      [null, 1],
      [0, null],
      [null, 3],
      [2, null],
    ]);
    expect(r.map((c) => c.dpRanks)).toEqual([
      [0, 2],
      [1, 3],
      [0, 2],
      [1, 3],
    ]);
    for (const c of r) expect([c.tpSum, c.ppSum, c.dpSum]).toEqual([c.rank, sum(c.ppRanks), sum(c.dpRanks)]);
  }, 60_000);

  it('rejects sizes whose product is not the world size, on every rank', async () => {
    const outcomes = await runWorld({
      worldSize: 4,
      script: '',
      nodeArgs: ['--input-type=module', '-e', child(index, '{ pp: 3 }')],
      timeoutMs: 45_000,
    });
    for (const o of outcomes) {
      expect(o.code).not.toBe(0);
      expect(o.stderr).toMatch(/InvalidArgumentError.*pp 3/);
    }
  }, 60_000);
});

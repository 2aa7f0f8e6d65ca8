import type { Dtype } from '../dtypes.js';
import {
  destroyProcessGroup,
  initProcessGroup,
  newGroup,
  newSubgroupsByEnumeration,
  type ProcessGroup,
} from '../index.js';
import { Checker } from './checker.js';
import { DTYPES, OPS } from './reference.js';
import { issue, SCENARIOS, type Scenario } from './scenarios.js';

/**
 * 1000 random collectives back to back, up to 8 in flight, on the world, on this rank's
 * subgroup of an enumeration (evens / odds) and on a group of ranks {0, last}. Every rank
 * draws the same sequence from a shared seed. Args: [count] [seed]
 */
const count = Number(process.argv[2] ?? 1000);
let seed = Number(process.argv[3] ?? 12345);
const rand = () => {
  // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;

const world = await initProcessGroup({ timeoutMs: 60_000 });
const ranks = Array.from({ length: world.size }, (_, r) => r);
const [mySub] = await newSubgroupsByEnumeration(
  [ranks.filter((r) => r % 2 === 0), ranks.filter((r) => r % 2 === 1)].filter((l) => l.length > 0),
);
const ends = await newGroup([0, world.size - 1]);
const c = new Checker();
const inFlight: Scenario[] = [];
const stats: Record<string, number> = {};

async function settle(limit: number): Promise<void> {
  while (inFlight.length > limit) {
    const s = inFlight.shift() as Scenario;
    await s.done;
    s.check(c);
  }
}

for (let i = 0; i < count; i++) {
  const which = pick(['world', 'world', 'world', 'sub', 'ends'] as const);
  const what = pick(SCENARIOS);
  const d: Dtype = pick(DTYPES);
  const r = rand();
  const n =
    r < 0.7 ? Math.floor(rand() * 65) : r < 0.97 ? Math.floor(rand() * 5000) : 70_000 + Math.floor(rand() * 60_000);
  const op = pick(OPS);
  const rootDraw = rand();
  const g: ProcessGroup | null = which === 'world' ? world : which === 'sub' ? (mySub as ProcessGroup) : ends;
  if (!g) continue;
  stats[what] = (stats[what] ?? 0) + 1;
  inFlight.push(issue(g, what, { d, n, op, salt: i, root: Math.floor(rootDraw * g.size) }));
  await settle(8);
}
await settle(0);
c.report({ rank: world.rank, stats });
await destroyProcessGroup();

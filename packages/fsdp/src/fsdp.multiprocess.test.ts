import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import type { Case } from './test/fsdp.child.js';

interface CaseResult {
  rank: number;
  /** The grid cases: the tp coordinate, whose replica this rank trains. */
  replica: number;
  maxDiff: number;
  hash: string;
  tensorGrowth: number;
  goldenDiff?: number;
  rootHoldsOnlyItsOwn?: boolean;
  /** Runs of an inner unit's forward per micro-batch: 1, none repeated in backward. */
  forwardsPerUnit: number;
  /** Most gathered parameter storages of the inner units still alive after a root forward. */
  heldAfterForward: number;
  /** Host buffers FSDP's steps took (its host-copy path). */
  hostBuffers: number;
  /** The heap path's reduce-scatter regions: gradients reduced in their own storage, and copies. */
  regions: { inPlace: number; copied: number };
  expectedRegions?: { inPlace: number; copied: number };
}

const TIMEOUT = 150_000;
const base: Case[] = [
  { model: 'golden', steps: 3 },
  { model: 'uneven', steps: 5 },
  { model: 'transformer', steps: 3 },
];
// each world starts its rank processes once and runs its cases in turn (start-up dominates)
const worlds: Record<number, Case[]> = {
  2: [
    ...base,
    { model: 'transformer', steps: 3, reshardAfterForward: false, accumulate: true },
    { model: 'transformer', steps: 3, checkpoint: true, accumulate: true },
    { model: 'transformer', steps: 3, accumulate: true, skipInSync: true },
    { model: 'uneven', steps: 5, decayGroups: true },
    { model: 'transformer', steps: 3, reshardAfterForward: false, block1OnRank0: true },
  ],
  3: [
    ...base,
    { model: 'uneven', steps: 5, prefetch: false, accumulate: true },
    { model: 'golden', steps: 3, commDtype: 'bfloat16' },
    { model: 'transformer', steps: 3, reshardAfterForward: false },
    { model: 'transformer', steps: 3, sideOnRank0: true },
  ],
  4: [
    ...base,
    { model: 'golden', steps: 3, commDtype: 'float16' },
    { model: 'uneven', steps: 5, tp: 2 },
    { model: 'transformer', steps: 3, checkpoint: true },
  ],
};
const results: Record<number, Promise<CaseResult[][]>> = {};

function run(n: number): Promise<CaseResult[][]> {
  results[n] ??= runWorld<CaseResult[]>({
    script: new URL('./test/fsdp.child.ts', import.meta.url),
    nprocs: n,
    args: [JSON.stringify(worlds[n])],
    timeoutMs: TIMEOUT,
  }).then(({ results: byRank }) => worlds[n].map((_, c) => byRank.map((r) => r[c])));
  return results[n];
}

const label = (c: Case) =>
  [
    c.model,
    `${c.steps} steps`,
    c.reshardAfterForward === false ? 'kept after forward' : '',
    c.prefetch === false ? 'no prefetch' : '',
    c.accumulate ? 'noSync accumulation' : '',
    c.skipInSync ? 'a unit trained under noSync and skipped by the synced backward' : '',
    c.checkpoint ? 'activation checkpointing in the units' : '',
    c.decayGroups ? 'AdamW groups by parameter shape: weight decay on the matrices, none on the biases' : '',
    c.block1OnRank0 ? 'a unit only rank 0 runs' : '',
    c.sideOnRank0 ? "a root parameter only rank 0's loss uses (elsewhere: none does)" : '',
    c.commDtype ?? '',
    c.tp ? `FSDP over the dp groups of a dp 2 × tp ${c.tp} grid, a replica per tp rank` : '',
  ]
    .filter(Boolean)
    .join(', ');

describe.each([2, 3, 4])('fullyShard on %i ranks', (n) => {
  it.each(worlds[n].map((c, i) => [label(c), i] as const))(
    '%s: equals the single-process run',
    async (_, i) => {
      const ranks = (await run(n))[i];
      const c = worlds[n][i];
      // equal within a replica (a dp group); replicas trained on different data differ
      const replicas = [...new Set(ranks.map((r) => r.replica))];
      expect(replicas.length).toBe(c.tp ?? 1);
      for (const k of replicas) expect(new Set(ranks.filter((r) => r.replica === k).map((r) => r.hash)).size).toBe(1);
      expect(new Set(ranks.map((r) => r.hash)).size).toBe(replicas.length);
      for (const r of ranks) {
        // on the wire float16 keeps 11 significant bits, bfloat16 8
        const tol = c.commDtype ? { float16: 1e-3, bfloat16: 1e-2 }[c.commDtype] : 1e-5;
        expect(r.maxDiff).toBeLessThan(tol);
        if (r.goldenDiff !== undefined) expect(r.goldenDiff).toBeLessThan(tol);
        expect(r.tensorGrowth).toBe(0);
        // block1 skips one of each step's two micro-batches: 3 forwards of 4
        // block1 runs on rank 0 only: half the inner units' forwards on the others
        expect(r.forwardsPerUnit).toBe(c.skipInSync ? 0.75 : c.block1OnRank0 && r.rank !== 0 ? 0.5 : 1);
        // resharded units: the graph keeps no parameter storage; kept ones show the probe sees it
        if (c.reshardAfterForward === false) expect(r.heldAfterForward).toBeGreaterThan(0);
        else expect(r.heldAfterForward).toBe(0);
        if (c.model === 'transformer') expect(r.rootHoldsOnlyItsOwn).toBe(true);
        // float32 gathers and reduce-scatters run on the wasm heap (comm writes the tensors); 16-bit ones copy
        if (c.commDtype) expect(r.hostBuffers).toBeGreaterThan(0);
        else expect(r.hostBuffers).toBe(0);
        // a gradient that fills its region is reduce-scattered where backward left it, not copied
        if (r.expectedRegions) expect(r.regions).toEqual(r.expectedRegions);
      }
    },
    TIMEOUT,
  );
});

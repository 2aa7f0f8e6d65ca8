import { mkdirSync, writeFileSync } from 'node:fs';
import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { childScript } from './child-script.js';
import type { Slopes } from './slope.js';

/**
 * Soak: 3 ranks run random small collectives then DDP steps of a tiny MLP; memory must be
 * flat after warm-up. RELIABILITY_SOAK=1 runs the full size (20 000 collectives, 500 DDP
 * steps); the default is a smaller run that checks the same slopes. Slopes (least squares,
 * per 1000 ops, after the first quarter) go to results/soak-<full|small>.json.
 */
const full = process.env.RELIABILITY_SOAK === '1';
const [collectives, ddpSteps] = full ? [20_000, 500] : [1000, 80];

interface SoakResult {
  mismatches: number;
  collectiveSlopes: Slopes;
  ddpSlopes: Slopes;
  paramsIdentical: boolean;
  gcForced: boolean;
}

const KiB = 1024;
const MiB = 1024 * KiB;

describe(`soak (${full ? 'full' : 'small; RELIABILITY_SOAK=1 for the full size'})`, () => {
  it(`3 ranks: ${collectives} random collectives and ${ddpSteps} DDP steps, memory flat`, {
    timeout: full ? 1_200_000 : 150_000,
  }, async () => {
    const run = await runWorld<SoakResult>({
      script: childScript('soak.child.ts'),
      nprocs: 3,
      args: [String(collectives), String(ddpSteps)],
      timeoutMs: full ? 1_100_000 : 140_000,
      env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --expose-gc`.trim() },
    });
    const results = run.results;
    mkdirSync(new URL('../results/', import.meta.url), { recursive: true });
    writeFileSync(
      new URL(`../results/soak-${full ? 'full' : 'small'}.json`, import.meta.url),
      `${JSON.stringify({ collectives, ddpSteps, ranks: results }, null, 2)}\n`,
    );
    for (const r of results) {
      expect(r.gcForced).toBe(true);
      expect(r.mismatches).toBe(0);
      expect(r.paramsIdentical).toBe(true);
      // not one tensor more per step once warm
      expect(r.collectiveSlopes.tensorsPer1000).toBe(0);
      expect(r.ddpSlopes.tensorsPer1000).toBe(0);
      // heap after a forced GC: a leak of 1 KiB per collective or 16 KiB per DDP step fails
      expect(r.collectiveSlopes.heapPer1000).toBeLessThan(1 * MiB);
      expect(r.ddpSlopes.heapPer1000).toBeLessThan(16 * MiB);
      // RSS moves in big steps (wasm memory, allocator arenas): judged on the full run only
      if (full) {
        expect(r.collectiveSlopes.rssPer1000).toBeLessThan(2 * MiB);
        expect(r.ddpSlopes.rssPer1000).toBeLessThan(32 * MiB);
      }
    }
  });
});

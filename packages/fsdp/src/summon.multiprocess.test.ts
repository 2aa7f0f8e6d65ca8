import { runWorld } from '@ddp/launch/testing';
import { expect, it } from 'vitest';

interface Result {
  rank: number;
  tied: string;
  tiedSiblings: string;
  loaded: number[];
  summoned: number[];
  losses: number[];
  referenceLosses: number[];
  sameWritten: string;
  checkpointLoaded: string;
  writtenApart: string;
}

it('tied weights across units refused; summonFullParams writes back and reads float32; an identity child', async () => {
  const { results } = await runWorld<Result>({
    script: new URL('./test/summon.child.ts', import.meta.url),
    nprocs: 2,
    timeoutMs: 60_000,
  });
  for (const r of results) {
    // before: the root's part of the tied gradient stayed on the full parameter and arrived a step late
    expect(r.tied).toMatch(/^FSDPError: fullyShard: Linear shares a parameter with a unit below Tied \(tied weights\)/);
    expect(r.tiedSiblings).toMatch(
      /^FSDPError: fullyShard: Head shares a parameter with the unit Linear \(tied weights\)/,
    );
    // before: the loaded values were dropped when the parameters were freed
    expect(r.loaded).toEqual([1, 1, 1, 1, 1, 1, 2, 2]);
    // before: rounded through bfloat16 (1, 2, 3, 0.1235351)
    expect(r.summoned).toEqual(Array.from(Float32Array.of(1.001, 2.003, 3.007, 0.123456)));
    // before: FSDPError at the first forward (the checksums fullyShard took of each rank's own initialisation)
    expect([r.sameWritten, r.checkpointLoaded]).toEqual(['ran', 'ran']);
    expect(r.writtenApart).toMatch(
      /^FSDPError: rank \d: parameter 0 of the sharded model differs between ranks 0 and 1/,
    );
    // before: TensorDisposedError (the identity's output, its input, was disposed as an intermediate)
    for (const [i, l] of r.losses.entries()) expect(l).toBeCloseTo(r.referenceLosses[i], 5);
  }
}, 60_000);

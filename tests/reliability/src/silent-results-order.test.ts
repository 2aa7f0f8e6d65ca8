import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { childScript as child } from './child-script.js';

/** Parameters paired by position across ranks or files, where their order differs (same shapes). */
describe('silent wrong results: parameters in another order', () => {
  // @ddp/reducer: DDP checked that every rank's parameters have the same shapes in the same order,
  // not that they are the same parameters: a model registering two same-shaped layers in another
  // order on one rank got rank 0's 'a' broadcast into its 'b' (so it computed another function)
  // and the ranks' gradients averaged across layers, silently. Now ParameterMismatchError at create.
  it('reducer: DDP.create refuses a rank whose same-shaped parameters are registered in another order', async () => {
    const run = await runWorld<{ error: string | null; hash: string }>({
      script: child('reordered.child.ts'),
      nprocs: 2,
    });
    for (const [rank, r] of run.results.entries())
      expect(
        r.error ?? `no error; parameter hashes ${run.results.map((x) => x.hash.slice(0, 8))}`,
        `rank ${rank}`,
      ).toMatch(
        /^ParameterMismatchError: DistributedDataParallel: parameter "a\.weight" differs between ranks 0 and 1: .*b\.w/,
      );
  }, 90_000);

  // @ddp/reducer: a parameter frozen on some ranks only. One layer frozen on rank 1 failed at the first backward
  // (CollectiveMismatchError: buckets of other sizes); two same-shaped layers, one frozen on each rank, trained
  // without an error, each rank's gradients averaged with the other layer's. Now refused at create.
  it.each(['one', 'swap'])(
    'reducer: DDP.create refuses a layer frozen on some ranks only (%s)',
    async (mode) => {
      const run = await runWorld<{ rank: number; error: string | null; hash: string }>({
        script: child('frozen-one-rank.child.ts'),
        nprocs: 2,
        args: [mode],
      });
      const hashes = run.results.map((r) => r.hash).join(', ');
      for (const r of run.results)
        expect(r.error ?? `no error; parameter hashes ${hashes}`, `rank ${r.rank}`).toMatch(
          /^ParameterMismatchError: .*"2\.weight" differs between ranks 0 and 1: it (requires grad|is frozen) on/,
        );
    },
    90_000,
  );

  // @ddp/fsdp: fullyShard keeps each rank's slice of its own model, so models seeded per rank
  // trained as a chimera of both, silently (torch's FSDP too, unless sync_module_states). Now the
  // first forward compares each parameter's checksum as fullyShard found it, as ZeRO's first step does.
  it('fsdp: models seeded per rank are refused at the first step', async () => {
    const run = await runWorld<{ rank: number; error: string | null }>({
      script: child('fsdp-per-rank-seed.child.ts'),
      nprocs: 2,
    });
    for (const r of run.results) expect(r.error ?? 'no error', `rank ${r.rank}`).toMatch(/^FSDPError: .*differs/);
  }, 90_000);
});

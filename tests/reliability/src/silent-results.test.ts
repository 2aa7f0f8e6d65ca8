import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { childScript as child } from './child-script.js';

/**
 * Wrong numbers without an error, found by using the packages from outside, each failing before
 * its fix; each says what was wrong and where it was fixed. Rows of @ddp/nn, data, zero,
 * syncbn and autograd are in those packages' tests.
 */
describe('silent wrong results, across packages', () => {
  // @ddp/comm: AVG of int32 summed in int32, so a sum beyond 2^31 − 1 wrapped before the
  // division: 3 ranks of 2^30 + r averaged to -357913940 instead of 2^30 + 1. Fixed at the
  // dispatch layer (op-dispatcher.ts, mpi-calls.ts): int32 AVG runs as a float64 SUM (exact
  // below 2^53) truncated toward zero, so every path sums exactly (comm's average.child.ts: the neighbours).
  it('comm: int32 AVG whose sum leaves int32 is the true average, on every rank and path', async () => {
    const run = await runWorld<Record<string, { first: number; uniform: boolean }>>({
      script: child('int-average.child.ts'),
      nprocs: 3,
    });
    for (const [rank, res] of run.results.entries()) {
      for (const [what, r] of Object.entries(res)) {
        expect(r, `rank ${rank} ${what}`).toEqual({ first: 2 ** 30 + 1, uniform: true });
      }
    }
  }, 90_000);

  // @ddp/reducer: DDP hooks the parameters that require grad when it is created; one unfrozen
  // afterwards (fine-tuning's second phase) kept its local gradient and the ranks stepped apart
  // without a word. Now the next forward raises DDPUsageError naming it, on every rank.
  it('reducer: a parameter unfrozen after DDP.create raises on every rank, or its gradient is averaged', async () => {
    const run = await runWorld<{ error: string | null; hash: string }>({
      script: child('unfrozen.child.ts'),
      nprocs: 2,
    });
    const [a, b] = run.results;
    if (a.error || b.error) for (const r of [a, b]) expect(r.error).toMatch(/^DDPUsageError: .*0\.weight/);
    else expect(a.hash, 'parameters equal on both ranks after the step').toBe(b.hash);
  }, 90_000);

  // @ddp/fsdp (fsdp): loadFSDPCheckpoint loads the replicated tensors (unsharded parameters,
  // buffers) with loadStateDict(…, strict = false), needed because the sharded parameters are
  // not in that file; so a buffer the checkpoint lacks (or holds besides) is skipped silently,
  // and batch norm kept its initial running statistics. Fixed (checkpoint-load.ts): the file's
  // keys and shapes are compared with what checkpoint-save.ts puts there (parameters in no unit,
  // persistent buffers); ShardedCheckpointError names the missing and unexpected ones.
  it('fsdp: a buffer the checkpoint does not hold raises ShardedCheckpointError on every rank', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'silent-fsdp-'));
    try {
      const script = child('fsdp-buffers.child.ts');
      const run = await runWorld<{ rank: number; error: string | null }>({ script, nprocs: 2, args: [dir] });
      for (const r of run.results)
        expect(r.error ?? 'no error', `rank ${r.rank}`).toMatch(/^ShardedCheckpointError: .*1\.running_mean/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 90_000);

  // @ddp/fsdp (fsdp): fullyShard shards only the parameters that require grad when it runs
  // (frozen ones stay whole); a layer unfrozen afterwards is in no shard, so an optimizer over
  // root.parameters() never steps it and its gradient is never averaged: fine-tuning's second
  // phase trained nothing there, silently. Fixed: each root forward with grad raises FSDPError
  // naming a parameter that requires grad but is in no unit's shard (fsdp's own tests: its neighbours).
  it('fsdp: a layer unfrozen after fullyShard raises on every rank, or is trained', async () => {
    const script = child('fsdp-unfrozen.child.ts');
    const run = await runWorld<{ rank: number; error: string | null; moved: boolean }>({ script, nprocs: 2 });
    for (const r of run.results) {
      if (r.error) expect(r.error, `rank ${r.rank}`).toMatch(/^FSDPError: .*unfrozen|^FSDPError: .*requires grad/);
      else expect(r.moved, `rank ${r.rank}: the unfrozen layer trained`).toBe(true);
    }
  }, 90_000);

  // @ddp/nn + fsdp + zero: clipGradNorm over FSDP's shards or ZeRO-2's owned gradients took this
  // rank's part alone, so each rank clipped by another, smaller norm than the model's (PyTorch's
  // FSDP2 clip_grad_norm_ takes the whole DTensor's). Fixed: those gradients are marked as split
  // (markGradientShard), clipGradNorm refuses them, clipGradNormDistributed sums over the group.
  it('fsdp, zero stage 2: clipGradNorm refuses sharded gradients; the distributed norm is the whole model norm', async () => {
    type Kind = { clipGradNorm: number | string; distributed: number };
    type Result = { rank: number; want: number } & Record<'fsdp' | 'zero', Kind>;
    const run = await runWorld<Result>({ script: child('sharded-clip.child.ts'), nprocs: 2, timeoutMs: 60_000 });
    for (const r of run.results) {
      for (const kind of ['fsdp', 'zero'] as const) {
        expect(r[kind].clipGradNorm, `rank ${r.rank} ${kind}`).toMatch(/^OptimizerError: clipGradNorm: .*split/);
        expect(r[kind].distributed, `rank ${r.rank} ${kind}`).toBeCloseTo(r.want, 5);
      }
    }
  }, 90_000);
});

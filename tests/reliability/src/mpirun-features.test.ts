import { fileURLToPath } from 'node:url';
import { mpirunMissing, runMpirun, runWorld } from '@ddp/launch/testing';
import { loadMpi, whyMissing } from '@ddp/mpi';
import { describe, expect, it } from 'vitest';

/**
 * ZeRO, tensor, pipeline and contrastive parallelism run unchanged on comm's 'mpi' backend: each
 * package's own rank script under `mpirun -np 4` with DDP_COMM_BACKEND=mpi (ranks from Open MPI,
 * no store). Scripts that check themselves against one process are held to their own tests'
 * bounds; the others must give what the same script gives on ddp's own transports.
 */
const missing = mpirunMissing() ?? (loadMpi() ? null : whyMissing());
if (missing) console.log(`features on the mpi backend skipped: ${missing}`);
const MPI = { DDP_COMM_BACKEND: 'mpi' };
const script = (path: string) => fileURLToPath(new URL(`../../../packages/${path}`, import.meta.url));

async function underMpirun<R>(path: string, args: string[]): Promise<R[]> {
  const out = await runMpirun({ np: 4, script: script(path), args, env: MPI, timeoutMs: 100_000 });
  expect(out[0]?.code, out.map((o) => o.stderr).join('\n')).toBe(0);
  return out.map((o) => o.results.at(-1) as R);
}

/** Every number in `got` within `tol` of the same place in `want` (structure and strings equal). */
function expectNumbersClose(got: unknown, want: unknown, tol: number, at = 'result'): void {
  if (typeof want === 'number') {
    expect(typeof got, at).toBe('number');
    expect(Math.abs((got as number) - want), at).toBeLessThanOrEqual(tol * Math.max(1, Math.abs(want)));
  } else if (want !== null && typeof want === 'object') {
    expect(Object.keys(got as object).sort(), at).toEqual(Object.keys(want).sort());
    for (const [k, v] of Object.entries(want))
      expectNumbersClose((got as Record<string, unknown>)[k], v, tol, `${at}.${k}`);
  } else expect(got, at).toEqual(want);
}

/** The same script on ddp's own transports (launch, TCP store), for the scripts that do not check themselves. */
async function onDefaultBackend<R>(path: string, args: string[]): Promise<R[]> {
  return (await runWorld<R>({ script: script(path), nprocs: 4, args, timeoutMs: 100_000 })).results;
}

describe.skipIf(missing !== null)("every parallelism on the 'mpi' backend, mpirun -np 4", () => {
  it('ZeRO stage 1 and 2 (Adam, AdamW, with DDP): parameters equal the full optimizer within 1e-6 on every rank', async () => {
    const cases = [
      { stage: 1, opt: 'adam', mode: 'even', ddp: true },
      { stage: 2, opt: 'adamw', mode: 'even', bucket: true },
    ];
    const ranks = await underMpirun<{ maxDiff: number; hash: string; tensorGrowth: number }[]>(
      'zero/src/test/zero.child.ts',
      [JSON.stringify(cases)],
    );
    cases.forEach((_, c) => {
      expect(new Set(ranks.map((r) => r[c].hash)).size).toBe(1);
      for (const r of ranks) expect(r[c].maxDiff).toBeLessThan(1e-6);
    });
  }, 110_000);

  it('tensor parallel, dp 2 × tp 2: the unsharded logits and AdamW step within 1e-5, no leak', async () => {
    type TpResult = { logits: number; weights: number; leaked: number; layers: Record<string, number> };
    const ranks = await underMpirun<TpResult & { dpRank: number; tpRank: number }>('tp/src/test/tp.child.ts', ['2']);
    expect(ranks.map((r) => [r.dpRank, r.tpRank])).toEqual([
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
    ]);
    for (const r of ranks) {
      expect(Math.max(r.logits, r.weights, ...Object.values(r.layers))).toBeLessThan(1e-5);
      expect(r.leaked).toBe(0);
    }
  }, 110_000);

  it('pipeline parallel, pp 2 × dp 2, 3 steps: the same weights and losses as on the default backend (1e-6)', async () => {
    const args = ['2', '2', '3'];
    const [mpi, own] = [
      await underMpirun('pp/src/test/train.child.ts', args),
      await onDefaultBackend('pp/src/test/train.child.ts', args),
    ];
    // the activation peaks and tensor counts are counted, not computed: they must be equal too
    expectNumbersClose(mpi, own, 1e-6);
  }, 220_000);

  it("contrastive losses (CLIP, SigLIP, NT-Xent): the default backend's losses and gradients (1e-6)", async () => {
    const [mpi, own] = [
      await underMpirun('contrastive/src/test/contrastive.child.ts', []),
      await onDefaultBackend('contrastive/src/test/contrastive.child.ts', []),
    ];
    expectNumbersClose(mpi, own, 1e-6);
  }, 220_000);
});

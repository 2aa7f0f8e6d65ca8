import { spawnSync } from 'node:child_process';
import { loadMpi } from '@ddp/mpi';
import { describe, expect, it } from 'vitest';
import { expectParamsClose, okResultsOf } from './test/expect.js';
import { loadGolden, MLP_KEYS } from './test/models.js';
import { runMpiWorld } from './test/run-ranks.js';

const missing =
  spawnSync('mpirun', ['--version']).status !== 0
    ? 'mpirun (Open MPI) is not installed'
    : loadMpi()
      ? null
      : '@ddp/mpi is not built (libopenmpi-dev)';
if (missing) console.log(`DDP on the mpi backend skipped: ${missing}`);
const golden = loadGolden();
type Params = Record<string, number[]>;

/** DistributedDataParallel unchanged on comm's 'mpi' backend: the same results as on ddp's own transports. */
describe.skipIf(missing !== null)("DistributedDataParallel on the 'mpi' backend (mpirun)", () => {
  for (const world of [2, 3]) {
    it(`-np ${world}: reproduces mlp_sgd_3steps.json within 1e-5; a transformer matches the single process, memory flat`, async () => {
      const results = await runMpiWorld(world, ['golden', 'transformer'], 60_000);
      for (const r of okResultsOf(results, 'golden')) {
        (r.steps as Params[]).forEach((step, s) => {
          const want = Object.fromEntries(
            Object.entries(MLP_KEYS).map(([g, key]) => [
              key,
              golden.outputs.weights_after_step[s][g as keyof typeof MLP_KEYS].data,
            ]),
          );
          expectParamsClose(step, want, 1e-5);
        });
      }
      const ranks = okResultsOf(results, 'transformer');
      for (const r of ranks) {
        expectParamsClose(r.params as Params, ranks[0].reference as Params, 1e-4);
        const [at5, at20] = r.numTensors as number[];
        expect(at20).toBe(at5);
      }
      expect(results.map((r) => r.__exit?.code)).toEqual(Array(world).fill(0));
    }, 70_000);
  }
});

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runSampleWorld, SAMPLE_PREFIX } from './world.js';

/**
 * `pnpm bench comm`'s peers, measured on the same sizes with the same iteration rule as @ddp/comm
 * (Gloo at most 1 000 iterations, not 10 000: its small all-reduces take 0.4–5 ms, and compiled
 * C++ needs no warm-up of JIT tiers).
 */
export interface Timing {
  bytes: number;
  us: number;
}

const GLOO = `
import json, os, sys, time, torch, torch.distributed as dist
rank, world = int(os.environ['RANK']), int(os.environ['WORLD_SIZE'])
torch.set_num_threads(1)
dist.init_process_group('gloo', rank=rank, world_size=world)
for b in [int(x) for x in sys.argv[1].split(',')]:
    t = torch.ones(b // 4, dtype=torch.float32)
    n = max(3, min(1000, round(128 * 1024 * 1024 / b)))
    for _ in range(n): dist.all_reduce(t)
    dist.barrier()
    s = time.perf_counter()
    for _ in range(n): dist.all_reduce(t)
    us = (time.perf_counter() - s) / n * 1e6
    if rank == 0: print('SAMPLE ' + json.dumps({'bytes': b, 'us': us}), flush=True)
dist.destroy_process_group()
`;

/** Gloo (PyTorch's CPU backend); `where` puts ranks on other "hosts" (network namespaces). */
export async function runGloo(
  world: number,
  sizes: number[],
  where: { masterAddr?: string; wrap?: (rank: number) => string[] } = {},
): Promise<Timing[]> {
  const args = ['-c', GLOO, sizes.join(',')];
  const opts = { env: { OMP_NUM_THREADS: '1' }, timeoutMs: 300_000, ...where };
  return (await runSampleWorld<Timing>(world, '/usr/bin/python3', args, opts)).flat();
}

/**
 * Open MPI's MPI_Allreduce (src/mpi-allreduce.c, built here with mpicc, run by mpirun on
 * this host: its shared-memory transport), or why it cannot run.
 */
export function openMpi(): { version: string; run: (world: number, sizes: number[]) => Timing[] } | string {
  const version = spawnSync('mpirun', ['--version'], { encoding: 'utf8' });
  if (version.status !== 0) return 'mpirun not found';
  const bin = join(mkdtempSync(join(tmpdir(), 'ddp-bench-mpi-')), 'mpi-allreduce');
  try {
    const source = fileURLToPath(new URL('../mpi-allreduce.c', import.meta.url));
    execFileSync('mpicc', ['-O2', '-o', bin, source], { stdio: 'pipe' });
  } catch (e) {
    return `mpicc failed: ${(e as Error).message.split('\n')[0]}`;
  }
  const run = (world: number, sizes: number[]): Timing[] => {
    const args = ['--allow-run-as-root', '--oversubscribe', '-np', String(world), bin, sizes.join(',')];
    const out = execFileSync('mpirun', args, { encoding: 'utf8', timeout: 300_000, stdio: ['ignore', 'pipe', 'pipe'] });
    return out
      .split('\n')
      .filter((l) => l.startsWith(SAMPLE_PREFIX))
      .map((l) => JSON.parse(l.slice(SAMPLE_PREFIX.length)) as Timing);
  };
  return { version: /\d+\.\d+\.\d+/.exec(version.stdout)?.[0] ?? 'Open MPI', run };
}

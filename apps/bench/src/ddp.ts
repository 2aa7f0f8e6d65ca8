/**
 * `pnpm bench ddp`: training-step time of an MLP (~12.6 M parameters by default) under
 * @ddp/reducer, weak scaling (the same per-rank batch at every world size):
 * - `ddp`: DistributedDataParallel (25 MiB buckets, first 1 MiB) at 1 and 2 ranks;
 * - `after`: DDP with one bucket for all gradients, i.e. the all-reduce starts after backward;
 * - `naive`: DataParallelNaive, one all-reduce per parameter;
 * - `compute`: the same step without any gradient communication (the floor);
 * - `comm`: the all-reduce of all gradients alone;
 * - `torch`: PyTorch DDP over Gloo on the same model and batch, when /usr/bin/python3 imports torch.
 * Writes results/ddp.{json,md,png}.
 *
 *   node --conditions=source --import tsx apps/bench/src/ddp.ts [--quick] [--width=2048] [--batch=32] [--rounds=2]
 */
import { fileURLToPath } from 'node:url';
import { glooTorchVersion, printSample, runSampleWorld } from './lib/world.js';

const quick = process.argv.includes('--quick');
const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const WIDTH = arg('width', 2048);
const BATCH = arg('batch', 32);
const STEPS = quick ? 3 : 6;
/** Rounds over all variants, alternating; each variant keeps its best round (the machine's load drifts). */
const ROUNDS = quick ? 1 : arg('rounds', 2);
const WARMUP = 2;
/** Linear(W/2 → W), GELU, Linear(W → W), GELU, Linear(W → W), GELU, Linear(W → W/2). */
const dims = [WIDTH / 2, WIDTH, WIDTH, WIDTH, WIDTH / 2];
const paramCount = dims.slice(1).reduce((n, d, i) => n + dims[i]! * d + d, 0);

interface Sample {
  variant: string;
  world: number;
  ms: number;
}

/** One rank: times STEPS training steps of `variant` (after WARMUP), rank 0 prints the median. */
async function rankMain(variant: string): Promise<void> {
  const { initProcessGroup, destroyProcessGroup, sharedArray } = await import('@ddp/comm');
  const { fromTf, tidy } = await import('@ddp/autograd');
  const { GELU, Generator, Linear, mse, SGD, Sequential } = await import('@ddp/nn');
  const { tf } = await import('@ddp/tensor');
  const { DataParallelNaive, DistributedDataParallel } = await import('@ddp/reducer');
  const pg = await initProcessGroup({ timeoutMs: 300_000 });
  const gen = new Generator(0);
  const layers = dims.slice(1).flatMap((d, i) => [new Linear(dims[i]!, d, { generator: gen }), ...(i < dims.length - 2 ? [new GELU()] : [])]);
  const model = new Sequential(...layers);
  const times: number[] = [];
  if (variant === 'comm') {
    const flat = sharedArray(Float32Array, paramCount).fill(1);
    for (let s = 0; s < WARMUP + STEPS; s++) {
      const t0 = performance.now();
      await pg.allReduce(flat).wait();
      if (s >= WARMUP) times.push(performance.now() - t0);
    }
  } else {
    const wrapped =
      variant === 'naive'
        ? await DataParallelNaive.create(model)
        : variant === 'compute'
          ? model
          : await DistributedDataParallel.create(model, variant === 'after' ? { firstBucketMB: 1e6, bucketCapMB: 1e6 } : {});
    const opt = new SGD(model.parameters(), { lr: 1e-3 });
    const x = fromTf(tf.tensor(gen.normal(BATCH * dims[0]!), [BATCH, dims[0]!]));
    const y = fromTf(tf.tensor(gen.normal(BATCH * dims.at(-1)!), [BATCH, dims.at(-1)!]));
    for (let s = 0; s < WARMUP + STEPS; s++) {
      await pg.barrier().wait();
      const t0 = performance.now();
      const loss = tidy(() => mse(wrapped.forward(x) as ReturnType<typeof model.forward>, y));
      await loss.backward();
      loss.dispose();
      opt.step();
      opt.zeroGrad();
      if (s >= WARMUP) times.push(performance.now() - t0);
    }
  }
  times.sort((a, b) => a - b);
  if (pg.rank === 0) printSample({ ms: times[Math.floor(times.length / 2)] });
  await destroyProcessGroup();
}

/** Runs `world` processes of cmd/args with the torchrun environment; resolves with rank 0's step time. */
async function runWorld(world: number, cmd: string, args: string[]): Promise<number> {
  const [sample] = (await runSampleWorld<{ ms: number }>(world, cmd, args, { env: { OMP_NUM_THREADS: '1' } })).flat();
  if (!sample) throw new Error(`no SAMPLE from ${cmd} ${args.join(' ')}`);
  return sample.ms;
}

const TORCH = `
import json, os, sys, time, torch, torch.nn as nn, torch.distributed as dist
torch.set_num_threads(1)
dims, batch, steps, warmup = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
dist.init_process_group('gloo')
layers = []
for i in range(len(dims) - 1):
    layers.append(nn.Linear(dims[i], dims[i + 1]))
    if i < len(dims) - 2: layers.append(nn.GELU())
model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(batch, dims[0]), torch.randn(batch, dims[-1])
times = []
for s in range(warmup + steps):
    dist.barrier()
    t0 = time.perf_counter()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if s >= warmup: times.append((time.perf_counter() - t0) * 1e3)
times.sort()
if dist.get_rank() == 0: print('SAMPLE ' + json.dumps({'ms': times[len(times) // 2]}), flush=True)
dist.destroy_process_group()
`;


async function main(): Promise<void> {
  const self = fileURLToPath(import.meta.url);
  const ours = (world: number, variant: string) => runWorld(world, process.execPath, ['--conditions=source', '--import', 'tsx', self, `--rank=${variant}`, `--width=${WIDTH}`, `--batch=${BATCH}`, ...(quick ? ['--quick'] : [])]);
  const torch = glooTorchVersion();
  const samples: Sample[] = [];
  const plan: [string, number][] = [
    ['compute', 1],
    ['ddp', 1],
    ['compute', 2],
    ['comm', 2],
    ['ddp', 2],
    ['after', 2],
    ['naive', 2],
  ];
  if (torch) plan.push(['torch', 1], ['torch', 2]);
  const torchArgs = ['-c', TORCH, JSON.stringify(dims), `${BATCH}`, `${STEPS}`, `${WARMUP}`];
  for (let round = 0; round < ROUNDS; round++) {
    for (const [variant, world] of plan) {
      const ms = variant === 'torch' ? await runWorld(world, '/usr/bin/python3', torchArgs) : await ours(world, variant);
      const old = samples.find((s) => s.variant === variant && s.world === world);
      if (old) old.ms = Math.min(old.ms, ms);
      else samples.push({ variant, world, ms });
      console.log(`round ${round + 1}/${ROUNDS}: ${variant === 'torch' ? `torch ${torch} DDP/Gloo` : variant} × ${world}: ${ms.toFixed(1)} ms per step`);
    }
  }
  const ms = (variant: string, world: number) => samples.find((s) => s.variant === variant && s.world === world)?.ms ?? Number.NaN;
  const efficiency = ms('ddp', 1) / ms('ddp', 2);
  const exposed = ms('ddp', 2) - ms('compute', 2);
  const hidden = Math.min(1, Math.max(0, 1 - exposed / ms('comm', 2)));
  const rows = samples.map((s) => ({ variant: s.variant, world: s.world, msPerStep: Number(s.ms.toFixed(1)), vsDdp: s.world === 2 ? Number((s.ms / ms('ddp', 2)).toFixed(2)) : null }));
  const notes = [
    `MLP ${dims.join('→')} (${(paramCount / 1e6).toFixed(1)} M parameters, ${((paramCount * 4) / 2 ** 20).toFixed(0)} MiB of gradients), batch ${BATCH} per rank, SGD; median of ${STEPS} steps after ${WARMUP} warm-up, best of ${ROUNDS} alternating round(s), one process per rank on this ${process.platform} machine (2 shared cores: ranks compete with each other and with other work for CPU, so read ratios).`,
    `Weak-scaling efficiency at 2 ranks (DDP step at 1 rank / at 2 ranks): ${(efficiency * 100).toFixed(0)} %.`,
    `Communication hidden behind backward: 1 − (DDP step − compute-only step) / all-reduce alone, at 2 ranks: ${(hidden * 100).toFixed(0)} % (exposed ${exposed.toFixed(0)} ms of ${ms('comm', 2).toFixed(0)} ms).`,
    `All-reduce after backward (one bucket) / bucketed DDP: ${(ms('after', 2) / ms('ddp', 2)).toFixed(2)}; DataParallelNaive / DDP: ${(ms('naive', 2) / ms('ddp', 2)).toFixed(2)}.`,
    torch ? `PyTorch ${torch} DDP over Gloo, same model and batch (1 thread per rank): DDP step ours / torch at 2 ranks ${(ms('ddp', 2) / ms('torch', 2)).toFixed(2)}.` : 'PyTorch not importable under /usr/bin/python3: no comparison.',
    'Not measured here: a bandwidth-limited link (network namespaces + tc).',
  ].join('\n');
  const { writeReport } = await import('@ddp/plot');
  const outDir = fileURLToPath(new URL('../results', import.meta.url));
  const files = await writeReport(outDir, 'ddp', rows, {
    meta: { quick, width: WIDTH, batch: BATCH, paramCount, torch, samples, efficiency, hidden },
    notes,
    chart: { x: 'world', y: 'msPerStep', series: 'variant', title: 'training step (ms) by world size' },
  });
  console.log(notes);
  console.log(`wrote ${files.join(', ')}`);
}

const rankArg = process.argv.find((a) => a.startsWith('--rank='));
if (rankArg) await rankMain(rankArg.slice(7));
else await main();

import { median } from './step-stats.js';
import { pinLeavingACoreFree, ThreadCpu, threadCpuNs } from './thread-cpu.js';
import { printSample } from './world.js';

/** Linear(W/2 → W), GELU, (Linear(W → W), GELU) × (depth − 2), Linear(W → W/2). */
export const dimsOf = (width: number, depth: number) => [width / 2, ...Array<number>(depth - 1).fill(width), width / 2];
export const paramsOf = (dims: number[]) => dims.slice(1).reduce((n, d, i) => n + dims[i] * d + d, 0);

/** What one rank of `pnpm bench ddp` trains and times (from the bench's flags). */
export interface DdpRankRun {
  /** The MLP's layer widths: Linear(dims[i] → dims[i + 1]), GELU between. */
  dims: number[];
  /** Batch per rank. */
  batch: number;
  /** Fixed bucket cap (MiB); NaN: DDP tunes it. */
  bucketMB: number;
  steps: number;
  warmup: number;
}

/**
 * One rank. `interleaved`: one DDP model, and each step runs, one after the other, a step
 * without gradient sync (`compute`, under noSync), a DDP step whose comm hook communicates
 * nothing (`local`: DDP's own work, the bucket copies and checks), a DDP step (`ddp`) and
 * the all-reduce of all gradients alone (`comm`); the machine's drifting load then hits them alike.
 * `after` (one bucket, reduced after backward), `naive` (DataParallelNaive) and `solo` (DDP at
 * its defaults, without the comm row's gradient-sized array) run alone. Every variant first
 * takes `warmup` steps under noSync: its peak RSS then is the baseline its synchronized steps
 * are measured against (`info:rssOverNoSyncMiB`). A DDP without a given cap then trains until
 * its autotune has kept one (those iterations are not timed). Rank 0 prints the median time of
 * each, its peak RSS and the cap.
 */
export async function ddpRank(variant: string, run: DdpRankRun): Promise<void> {
  const { dims, batch, bucketMB, steps, warmup } = run;
  const paramCount = paramsOf(dims);
  const { initProcessGroup, destroyProcessGroup, ReduceOp, sharedArray } = await import('@ddp/comm');
  const { fromTf, tidy } = await import('@ddp/autograd');
  const { GELU, Generator, Linear, mse, SGD, Sequential } = await import('@ddp/nn');
  const { tf } = await import('@ddp/tensor');
  const { allreduceHook, DataParallelNaive, DistributedDataParallel, inPlaceHook } = await import('@ddp/reducer');
  const pg = await initProcessGroup({ timeoutMs: 300_000 });
  const gen = new Generator(0);
  const layers = dims
    .slice(1)
    .flatMap((d, i) => [new Linear(dims[i], d, { generator: gen }), ...(i < dims.length - 2 ? [new GELU()] : [])]);
  const model = new Sequential(...layers);
  const wrapped =
    variant === 'naive'
      ? await DataParallelNaive.create(model)
      : await DistributedDataParallel.create(
          model,
          variant === 'after'
            ? { firstBucketMB: 1e6, bucketCapMB: 1e6 }
            : Number.isNaN(bucketMB)
              ? {}
              : { bucketCapMB: bucketMB },
        );
  const opt = new SGD(model.parameters(), { lr: 1e-3 });
  const x = fromTf(tf.tensor(gen.normal(batch * dims[0]), [batch, dims[0]]));
  const y = fromTf(tf.tensor(gen.normal(batch * dims.at(-1)!), [batch, dims.at(-1)!]));
  const backward = async () => {
    const loss = tidy(() => mse(wrapped.forward(x) as ReturnType<typeof model.forward>, y));
    await loss.backward();
    loss.dispose();
  };
  const train = async (sync: boolean) => {
    await (sync ? backward() : wrapped.noSync(backward));
    opt.step();
    opt.zeroGrad();
  };
  const peakRssMiB = () => process.resourceUsage().maxRSS / 1024;
  // the peak of steps without gradient sync first: what synchronized steps add beyond it is the variant's own memory
  for (let s = 0; s < warmup; s++) await train(false);
  const noSyncPeakRssMiB = peakRssMiB();
  // only where `comm` runs: filled, it would add a gradient-sized copy to every variant's peak RSS
  const flat = variant === 'interleaved' && pg.size > 1 ? sharedArray(Float32Array, paramCount).fill(1) : null;
  const hook = { communicate: true };
  if (wrapped instanceof DistributedDataParallel)
    wrapped.registerCommHook(
      hook,
      inPlaceHook((h, bucket) => (h.communicate ? allreduceHook(null, bucket) : Promise.resolve())),
    );
  const local = async () => {
    hook.communicate = false;
    await train(true);
    hook.communicate = true;
  };
  if (process.env.DDP_BENCH_FREE_CORE === '1') pinLeavingACoreFree(); // before the autotune: it times the pinned step
  // the autotune's trial iterations (a tuned cap exists only with a cap left to choose, and peers)
  if (wrapped instanceof DistributedDataParallel && pg.size > 1 && Number.isNaN(bucketMB) && variant !== 'after') {
    while (wrapped.bucketCapTuning === null) await train(true);
  }
  const modes: Record<string, () => Promise<unknown>> =
    variant !== 'interleaved'
      ? { [variant]: () => train(true) }
      : {
          compute: () => train(false),
          local,
          ddp: () => train(true),
          // AVG, as DDP's default hook: its last pass is part of the all-reduce's cost
          ...(flat ? { comm: () => pg.allReduce(flat, { op: ReduceOp.AVG }).wait() } : {}),
        };
  // wall time per mode, and CPU time (all threads and the kernel on this process's behalf) as `cpu:<mode>`
  const times: Record<string, number[]> = Object.fromEntries(
    Object.keys(modes).flatMap((m) => [
      [m, []],
      [`cpu:${m}`, []],
    ]),
  );
  const threads = new ThreadCpu();
  for (let s = 0; s < warmup + steps; s++) {
    for (const [mode, run] of Object.entries(modes)) {
      await pg.barrier().wait();
      const t0 = performance.now();
      const cpu0 = process.cpuUsage();
      const threads0 = threadCpuNs();
      await run();
      const cpu = process.cpuUsage(cpu0);
      if (s >= warmup) threads.add(mode, threads0);
      // a step lasts until the slowest rank is done: without this barrier compute and local
      // would time one rank while ddp waits for the slowest (measured: 20–35 % apart per step)
      await pg.barrier().wait();
      if (s >= warmup) {
        times[mode].push(performance.now() - t0);
        times[`cpu:${mode}`].push((cpu.user + cpu.system) / 1000);
      }
    }
  }
  const info = {
    'info:peakRssMiB': peakRssMiB(),
    'info:rssOverNoSyncMiB': peakRssMiB() - noSyncPeakRssMiB,
    ...(wrapped instanceof DistributedDataParallel ? { 'info:bucketCapMB': wrapped.bucketCapMB } : {}),
  };
  if (pg.rank === 0)
    printSample({
      ...Object.fromEntries(Object.entries(times).map(([m, t]) => [m, median(t)])),
      ...threads.report(steps),
      ...info,
    });
  await destroyProcessGroup();
}

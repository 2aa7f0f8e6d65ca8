/**
 * `pnpm bench ddp`: training-step time of an MLP (~12.6 M parameters by default) under
 * @ddp/reducer, weak scaling (the same per-rank batch at every world size), on this host,
 * at 1 and 2 ranks, over shared memory and over Unix sockets (rows `uds-*`):
 * - `ddp`: DistributedDataParallel at its defaults (bucket cap tuned in the first iterations; `--bucket-mb` fixes it);
 * - `after`: DDP with one bucket for all gradients, i.e. the all-reduce starts after backward;
 * - `naive`: DataParallelNaive, one all-reduce per parameter;
 * - `solo`: DDP at its defaults alone, run like `after` and `naive` (the three compared), and for its memory
 *   beside the steps under noSync;
 * - `compute`: the same step without any gradient communication (the floor);
 * - `local`: a DDP step whose comm hook sends nothing (DDP's own work: local − compute);
 * - `comm`: the all-reduce of all gradients alone;
 * - `torch`: PyTorch DDP (gradient_as_bucket_view) over Gloo on the same model and batch (src/ddp_twin.py), when
 *   /usr/bin/python3 imports torch.
 * Each rank also reports its peak RSS and the bucket cap DDP kept. Then, as root, two ranks
 * on two "hosts" (network namespaces) over a link limited by tc tbf (LINK below): compute,
 * comm, ddp and after again, and the fraction of communication hidden behind backward
 * there. Rows `free-core-*`: the interleaved run with the ranks leaving a core free (Setting below).
 * Writes results/ddp.{json,md,png}.
 */
import { fileURLToPath } from 'node:url';
import { TwoHosts } from '@ddp/netns';
import { CHARTS } from './lib/charts.js';
import { ddpRank, dimsOf, paramsOf } from './lib/ddp-rank.js';
import { type Entry, type Infos, type InterleavedRounds, measure, runWorld, type Sample } from './lib/ddp-rounds.js';
import { benchCommand, positiveInt, positiveNumber, rankFlag } from './lib/flags.js';
import { byRound, cpuNote, hiddenFraction, pct } from './lib/step-stats.js';
import { glooTorchVersion } from './lib/world.js';

const {
  quick,
  width: WIDTH,
  depth: DEPTH,
  batch: BATCH,
  bucketMb,
  rounds,
  link: withLink,
  uds: withUds,
  host: withHost,
  rank: rankVariant,
} = benchCommand('ddp', 'DistributedDataParallel against naive all-reduce and PyTorch DDP')
  .option('--quick', 'fewer steps, one round (a smoke run)', false)
  .option('--width <n>', 'hidden width of the MLP', positiveInt, 2048)
  .option('--depth <n>', 'hidden layers of the MLP', positiveInt, 4)
  .option('--batch <n>', 'batch per rank', positiveInt, 32)
  .option('--bucket-mb <MB>', 'fixed bucket cap (default: tuned)', positiveNumber)
  .option('--rounds <n>', 'rounds over all variants', positiveInt, 2)
  .option('--no-link', 'skip the limited-link runs')
  .option('--no-uds', 'skip the Unix-socket transport')
  .option('--no-host', 'the limited link only')
  .addOption(rankFlag('<variant>'))
  .parse()
  .opts<{
    quick: boolean;
    width: number;
    depth: number;
    batch: number;
    bucketMb?: number;
    rounds: number;
    link: boolean;
    uds: boolean;
    host: boolean;
    rank?: string;
  }>();
const BUCKET_MB = bucketMb ?? Number.NaN; // unset (NaN): DDP tunes its bucket cap
const STEPS = quick ? 3 : 6;
/** Rounds over all variants, alternating; each variant keeps its best round (the machine's load drifts). */
const ROUNDS = quick ? 1 : rounds;
const WARMUP = 2;
/**
 * The limited link: a model of many equal layers (so buckets fill as backward goes; 46 MiB of
 * gradients, 4 MiB a layer) and a batch whose backward outlasts the all-reduce at this rate:
 * what overlap needs. The all-reduce alone takes ~390 ms on the wire (2 ranks: each sends the
 * 46 MiB once) and 530–590 ms measured; with the native kernels (1 thread) backward took 99 ms
 * of CPU at batch 256 (the old premise held only with the wasm kernels), 348 at 1024, 532 at
 * 1536: batch 2048 (~700 ms) outlasts it. The token bucket holds 1 ms of traffic: a larger
 * burst refills while DDP waits for the next bucket and would let bursts through faster than
 * the rate (measured: 1 MB made 4 MiB all-reduces 1.7× faster than back-to-back ones; 128 KB
 * still reaches the full rate).
 */
const LINK = { rate: '1gbit', burst: '128kb', width: 1024, depth: 12, batch: 2048 };
const dims = dimsOf(WIDTH, DEPTH);
const paramCount = paramsOf(dims);

const rankArgs = (self: string, variant: string, width: number, depth: number, batch: number) => [
  '--conditions=@ddp/source',
  '--import',
  'tsx',
  self,
  `--rank=${variant}`,
  `--width=${width}`,
  `--depth=${depth}`,
  `--batch=${batch}`,
  ...(Number.isNaN(BUCKET_MB) ? [] : [`--bucket-mb=${BUCKET_MB}`]),
  ...(quick ? ['--quick'] : []),
];

/** The limited-link runs (their interleaved step times by round and setting), or why they were skipped. */
async function overLink(self: string, samples: Sample[], infos: Infos): Promise<InterleavedRounds | string> {
  if (!withLink) return 'skipped (--no-link)';
  const hosts = new TwoHosts('bl', '10.231.80');
  const skip = hosts.setUp();
  if (skip) return `skipped: ${skip}`;
  try {
    hosts.limit(LINK.rate, LINK.burst);
    const plan: Entry[] = [
      ['interleaved', 1],
      ['interleaved', 2],
      ['interleaved', 2, 'free-core'],
      ['after', 2],
    ];
    const run = (variant: string, world: number, env: Record<string, string>) =>
      runWorld(world, process.execPath, rankArgs(self, variant, LINK.width, LINK.depth, LINK.batch), hosts, env);
    return await measure(plan, run, 'link-', samples, infos, ROUNDS);
  } finally {
    hosts.tearDown();
  }
}

async function main(): Promise<void> {
  const self = fileURLToPath(import.meta.url);
  const torch = glooTorchVersion();
  const torchArgs = [
    fileURLToPath(new URL('ddp_twin.py', import.meta.url)),
    JSON.stringify(dims),
    `${BATCH}`,
    `${STEPS}`,
    `${WARMUP}`,
  ];
  const samples: Sample[] = [];
  const infos: Infos = [];
  const transports: ('uds' | undefined)[] = !withUds ? [undefined] : [undefined, 'uds'];
  // solo beside after and naive: the three compared run alike, each alone in its processes
  const plan: Entry[] = [
    ['interleaved', 1],
    ['solo', 1],
    ['after', 1],
    ['naive', 1],
  ];
  for (const t of transports) plan.push(['interleaved', 2, t], ['solo', 2, t], ['after', 2, t], ['naive', 2, t]);
  plan.push(['interleaved', 2, 'free-core']);
  if (torch) plan.push(['torch', 1], ['torch', 2]);
  if (!withHost) plan.length = 0; // the limited link only
  const run = (variant: string, world: number, env: Record<string, string>) =>
    variant === 'torch'
      ? runWorld(world, '/usr/bin/python3', torchArgs)
      : runWorld(world, process.execPath, rankArgs(self, variant, WIDTH, DEPTH, BATCH), undefined, env);
  const hostRounds = await measure(plan, run, '', samples, infos, ROUNDS);
  const link = await overLink(self, samples, infos);
  const ms = (variant: string, world: number) =>
    samples.find((s) => s.variant === variant && s.world === world)?.ms ?? Number.NaN;
  const info = (variant: string, world: number) =>
    infos.filter((i) => i.variant === variant && i.world === world).map((i) => i.value);
  const efficiency = ms('ddp', 1) / ms('ddp', 2);
  const computeScaling = ms('compute', 1) / ms('compute', 2);
  const hidden = (runs: InterleavedRounds, setting: string) => (runs[2]?.[setting] ?? []).map(hiddenFraction);
  const hiddenByRound = hidden(hostRounds, '');
  const freeCoreHiddenByRound = hidden(hostRounds, 'free-core');
  const linkHiddenByRound = typeof link === 'string' ? [] : hidden(link, '');
  const linkFreeCoreHiddenByRound = typeof link === 'string' ? [] : hidden(link, 'free-core');
  const prefixes = transports.map((t) => (t ? `${t}-` : ''));
  // each round's local and compute come from the same processes, so the ratio is taken per round
  const ownWorkByRound = Object.fromEntries(
    [1, 2].flatMap((w) =>
      (w === 1 ? [''] : prefixes).map((p) => [
        `${w} rank(s)${p ? ` over ${p.slice(0, -1)}` : ''}`,
        (hostRounds[w]?.[p.slice(0, -1)] ?? []).map((t) => (t.local - t.compute) / t.compute),
      ]),
    ),
  );
  const ownWork = Object.entries(ownWorkByRound).map(([where, xs]) => `${where}: ${byRound(xs)}`);
  const versus = [1, 2].flatMap((w) =>
    (w === 1 ? [''] : prefixes).map(
      (p) =>
        `${w} rank(s)${p ? ` over ${p.slice(0, -1)}` : ''}: ddp ${ms(`${p}solo`, w).toFixed(0)}, after ` +
        `${ms(`${p}after`, w).toFixed(0)}, naive ${ms(`${p}naive`, w).toFixed(0)} ms ` +
        `(interleaved with compute and local: ddp ${ms(`${p}ddp`, w).toFixed(0)})`,
    ),
  );
  const linkGradMiB = (paramsOf(dimsOf(LINK.width, LINK.depth)) * 4) / 2 ** 20;
  /** The caps kept by round; one that holds every gradient is one bucket, the first included. */
  const kept = (name: string, gradients: number) =>
    `${info(name, 2)
      .map((mb) => `${mb}${mb >= gradients ? ' (one bucket)' : ''}`)
      .join(', ')} MiB`;
  const caps = prefixes.map((p) => {
    const of = (v: string) => kept(`${p}${v}-info:bucketCapMB`, (paramCount * 4) / 2 ** 20);
    return `${p || 'shared memory '}${of('interleaved')} (alone: ${of('solo')})`;
  });
  const rss = (v: string) => `${v} ${Math.max(...info(`${v}-info:peakRssMiB`, 2)).toFixed(0)}`;
  const overNoSync = (v: string) => `${v} +${Math.max(...info(`${v}-info:rssOverNoSyncMiB`, 2)).toFixed(0)}`;
  const rows = samples.map((s) => ({
    variant: s.variant,
    world: s.world,
    msPerStep: Number(s.ms.toFixed(1)),
    vsDdp:
      s.world === 2 && !/^link-|^uds-|^free-core-|^cpu:|^thread:/.test(s.variant)
        ? Number((s.ms / ms('ddp', 2)).toFixed(2))
        : null,
  }));
  const linkDims = dimsOf(LINK.width, LINK.depth);
  const gradMiB = (paramCount * 4) / 2 ** 20;
  const notes = [
    `On this host: MLP ${dims.join('→')} (${(paramCount / 1e6).toFixed(1)} M parameters, ` +
      `${gradMiB.toFixed(0)} MiB of gradients), batch ${BATCH} per rank, SGD, ` +
      `${Number.isNaN(BUCKET_MB) ? 'DDP at its defaults (bucket cap tuned)' : `${BUCKET_MB} MiB buckets`}; median ` +
      `of ${STEPS} steps after ${WARMUP} warm-up, best of ${ROUNDS} alternating round(s), one process per rank (2 ` +
      `shared cores: ranks compete with each other and with other work for CPU, so read ratios).`,
    "compute: the DDP model stepped under noSync; local: a DDP step whose comm hook sends nothing (DDP's own " +
      "work: the small gradients' bucket copies, finite check, bookkeeping; large gradients are reduced in place); " +
      'comm: the all-reduce of all gradients alone — interleaved step by step with ddp in the same processes, so ' +
      "load drift hits them alike. Rows cpu:<variant>: CPU time of rank 0's process per step (all threads, and the " +
      'kernel on its behalf). Rows uds-*: the same over Unix sockets (DDP_TRANSPORT=uds) instead of shared memory.',
    `DDP's own work, (local − compute) / compute: ${ownWork.join('; ')}.`,
    `Bucketed DDP against one bucket after backward and DataParallelNaive, ${versus.join('; ')}.`,
    `Bucket cap the autotune kept (2 ranks, by round): ${caps.join('; ')}.`,
    `Peak RSS of rank 0 at 2 ranks (MiB; gradients are ${gradMiB.toFixed(0)} MiB, held once, in the wasm ` +
      `heap: DDP reduces the large ones there; the interleaved run also fills a gradient-sized array for comm): ` +
      `${['interleaved', 'after', 'naive', ...(torch ? ['torch'] : [])].map(rss).join(', ')}. What synchronized ` +
      `steps add to the peak of the same process's steps under noSync (MiB, worst round; a second copy of the ` +
      `gradients would add ${gradMiB.toFixed(0)}): ${['solo', 'after', 'naive'].map(overNoSync).join(', ')} ` +
      `(naive stages every gradient in shared memory).`,
    `Weak-scaling efficiency at 2 ranks (DDP step at 1 rank / at 2 ranks): ${pct(efficiency)}; the compute ` +
      `alone: ${pct(computeScaling)} (two single-threaded ranks on the 2 cores slow each other).`,
    `Communication hidden behind backward, 1 − (ddp − local) / comm at 2 ranks (each step timed to the ` +
      `slowest rank), on this host: ${byRound(hiddenByRound)}; with the ranks leaving a core free (rows ` +
      `free-core-*: main threads pinned to CPU 0, comm threads to CPU 1): ${byRound(freeCoreHiddenByRound)}. ` +
      `${cpuNote(hostRounds[2]?.[''])}`,
    torch
      ? `PyTorch ${torch} DDP (gradient_as_bucket_view) over Gloo, same model and batch (1 thread per rank): ` +
        // `solo`: ours run alone, as the twin is (the interleaved `ddp` row runs between other variants)
        `DDP step ours (alone) / torch at 2 ranks ${(ms('solo', 2) / ms('torch', 2)).toFixed(2)}; ` +
        `torch's own weak scaling ` +
        `${pct(ms('torch', 1) / ms('torch', 2))}.`
      : 'PyTorch not importable under /usr/bin/python3: no comparison.',
    typeof link === 'string'
      ? `Limited link: ${link}.`
      : `Over a ${LINK.rate} link (tc tbf between two network namespaces, one rank on each; rows link-*): MLP ` +
        `${linkDims[0]}→${LINK.width}×${LINK.depth - 1}→${linkDims.at(-1)} (${(paramsOf(linkDims) / 1e6).toFixed(1)} ` +
        `M parameters), batch ${LINK.batch}, bucket cap kept ` +
        `${kept('link-interleaved-info:bucketCapMB', linkGradMiB)}: communication hidden behind backward ` +
        `${byRound(linkHiddenByRound)}; with the ranks leaving a core free (rows link-free-core-*; cap kept ` +
        `${kept('link-free-core-interleaved-info:bucketCapMB', linkGradMiB)}): ` +
        `${byRound(linkFreeCoreHiddenByRound)}. ${cpuNote(link[2]?.[''])}`,
  ].join('\n');
  const { writeReport } = await import('@ddp/plot');
  const outDir = fileURLToPath(new URL('../results', import.meta.url));
  const files = await writeReport(outDir, 'ddp', rows, {
    meta: {
      quick,
      width: WIDTH,
      depth: DEPTH,
      batch: BATCH,
      bucketMB: Number.isNaN(BUCKET_MB) ? 'tuned' : BUCKET_MB,
      paramCount,
      torch,
      samples,
      infos,
      efficiency,
      computeScaling,
      hiddenByRound,
      freeCoreHiddenByRound,
      ownWorkByRound,
      link: {
        ...LINK,
        hiddenByRound: linkHiddenByRound,
        freeCoreHiddenByRound: linkFreeCoreHiddenByRound,
        rounds: link,
      },
    },
    notes,
    chart: CHARTS.ddp.chart({}, rows),
  });
  console.log(notes);
  console.log(`wrote ${files.join(', ')}`);
}

if (rankVariant !== undefined)
  await ddpRank(rankVariant, { dims, batch: BATCH, bucketMB: BUCKET_MB, steps: STEPS, warmup: WARMUP });
else await main();

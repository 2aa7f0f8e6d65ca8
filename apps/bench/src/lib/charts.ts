// Every benchmark's chart, built from what its report keeps (rows and meta): `pnpm bench <name>`
// draws it, `pnpm bench replot` redraws it from results/<name>.json without running anything.
import type { LineChart, Row } from '@ddp/plot';

export type Meta = Record<string, unknown>;

export interface BenchChart {
  /** The rows the chart draws when they are not the report's rows (clip's curves live in meta). */
  rows?: (meta: Meta) => Row[];
  chart: (meta: Meta, rows: Row[]) => LineChart;
}

/** ddp's wall-clock step of the one-host run; CPU-time, per-thread and other-transport rows stay in the table. */
const DDP_CHARTED = new Set(['compute', 'local', 'ddp', 'comm', 'after', 'naive', 'torch']);

const adasum: BenchChart = {
  chart: (meta) => ({
    x: 'step',
    y: 'loss',
    series: 'series',
    panel: 'arm',
    title: `Adasum vs averaging, ${meta.world} ranks, ${meta.optimizer} (held-out MSE, log; η = single-worker lr)`,
    logY: true,
  }),
};

export const CHARTS: Record<string, BenchChart> = {
  adasum,
  'adasum-momentum': adasum,
  clip: {
    rows: (meta) => meta.curves as Row[],
    chart: (meta) => ({
      x: 'step',
      y: 'value',
      series: 'run',
      panel: 'metric',
      title: `CLIP on two-digit MNIST, ${(meta.run as { world: number }).world} ranks: apps/clip (ddp) vs PyTorch`,
    }),
  },
  comm: {
    chart: () => ({
      x: 'bytes',
      y: 'busGBs',
      xTitle: 'message size (bytes, log scale)',
      yTitle: 'bus bandwidth (GB/s)',
      series: 'series',
      title: 'all-reduce bus bandwidth: @ddp/comm vs Gloo and Open MPI (series: transport × ranks)',
      logX: true,
    }),
  },
  contrastive: {
    chart: (meta) => ({
      x: 'world',
      y: 'peakMB',
      xTitle: 'ranks',
      yTitle: 'peak tensor memory per rank (MB)',
      series: 'loss',
      title: `CLIP loss: peak tensor memory per rank${meta.global ? `, global batch ${meta.global}` : ''}`,
    }),
  },
  'data-parallel': {
    chart: (meta) => ({
      x: 'round',
      y: 'stepMs',
      yTitle: 'step time (ms)',
      series: 'way',
      title: `DataParallel vs DDP vs one process, global batch ${meta.batch}`,
    }),
  },
  ddp: {
    chart: () => ({
      x: 'world',
      y: 'msPerStep',
      xTitle: 'ranks',
      yTitle: 'step time (ms, wall clock)',
      series: 'variant',
      title: 'DDP training step by world size (one host; the other rows in ddp.md)',
      where: (r) => DDP_CHARTED.has(String(r.variant)),
    }),
  },
  kernels: {
    chart: () => ({
      x: 'case',
      y: 'native/torch',
      xTitle: 'case (a layer and pass: see the table)',
      yTitle: 'native ÷ PyTorch GFLOP/s',
      series: 'threads',
      title: 'matmul GFLOP/s, native ÷ PyTorch, per layer and pass (1 = as fast)',
    }),
  },
  pp: {
    chart: (_, rows) => ({
      x: 'microBatches',
      y: 'bubble',
      xTitle: 'micro-batches',
      yTitle: 'bubble (share of the step a stage idles)',
      percent: true,
      series: 'series',
      title: `pipeline bubble, ${new Set(rows.map((r) => r.stage)).size} stages`,
    }),
  },
  'shm-wait': {
    chart: () => ({
      x: 'rep',
      y: 'us',
      xTitle: 'repetition',
      yTitle: 'latency per all-reduce (µs)',
      series: 'policy',
      title: '4 KiB all-reduce latency by shared-memory wait policy',
    }),
  },
  zero: {
    chart: () => ({
      x: 'ranks',
      y: 'peakMBPerRank',
      yTitle: 'peak tensor memory per rank (MB)',
      series: 'mode',
      title: 'ZeRO and FSDP: peak tensor memory per rank',
    }),
  },
};
// a two-hosts-only `pnpm bench comm` run's report: the same chart
CHARTS['comm-two-hosts'] = CHARTS.comm;

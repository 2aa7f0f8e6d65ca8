/**
 * Kernel benchmark, ddp beside PyTorch in the same run:
 * - matmul GFLOP/s for the Linear layers of the DDP bench and the CLIP model, forward (x·Wᵀ)
 *   and backward (dy·W, dyᵀ·x), at 1 and 2 threads: tfjs-wasm's kernel (`wasm`), the
 *   @ddp/native-kernels one (`native`) and PyTorch (`torch`, the kernels.py peer), case by case;
 * - conv2d forward (bias inside) and backward (the gradients training takes, in one call) for the CLIP
 *   model's two convolutions as @ddp/autograd's conv2d runs them (NCHW), the same way;
 * - @ddp/tensor's fused ops (layer norm, GELU, softmax; forward and backward): tfjs ops, native, ATen;
 * - one training step of a small causal transformer (@ddp/nn on @ddp/autograd), wasm and native;
 * - the memory bandwidth at 1 and 2 threads (src/stream.c) beside each matmul case's bytes.
 * Writes results/kernels.{json,md,png}.
 *
 *   node --conditions=@ddp/source --import tsx apps/bench/src/kernels.ts \
 *     [--threads 1,2] [--seconds 0.2] [--rounds 3] [--cpu]
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { markdownTable, type Row, writeReport } from '@ddp/plot';
import { getNumThreads, nativeKernelsSummary, setBackend, setNumThreads, useNativeKernels } from '@ddp/tensor';
import { CHARTS } from './lib/charts.js';
import { benchCommand, positiveInt, positiveIntList, positiveNumber } from './lib/flags.js';
import {
  CONV_PASSES,
  CONVS,
  convFlops,
  convSeconds,
  FUSED,
  fusedSeconds,
  LINEARS,
  type MatmulCase,
  matmulSeconds,
  passesOf,
} from './lib/kernel-cases.js';
import { memoryBoundRows, productBytes, streamBandwidth, TARGET_SPEEDUP } from './lib/memory-bound.js';
import { STEP, transformerStep } from './lib/tiny-gpt.js';
import { TorchPeer } from './lib/torch-peer.js';

const here = dirname(fileURLToPath(import.meta.url));
const args = benchCommand('kernels', 'tfjs kernels (wasm, native) against PyTorch, op by op')
  .option('--threads <n,…>', 'thread counts', positiveIntList, [1, 2])
  .option('--seconds <s>', 'minimum seconds per case', positiveNumber, 0.2)
  .option('--rounds <n>', 'rounds per case', positiveInt, 3)
  .option('--cpu', "also tfjs's cpu backend", false)
  .option('--out <dir>', 'where the report goes', join(here, '..', 'results'))
  .parse()
  .opts<{ threads: number[]; seconds: number; rounds: number; cpu: boolean; out: string }>();
const minSeconds = args.seconds;
/** Rounds per case, engines alternating; each engine keeps its best round (the machine's load drifts). */
const rounds = args.rounds;
const threadCounts = args.threads;

await setBackend('wasm');
const torch = TorchPeer.start(join(here, 'kernels.py'));
if (!torch) console.log('PyTorch not importable by /usr/bin/python3: ddp only');
const native = useNativeKernels(true);
console.log(nativeKernelsSummary());
const initialThreads = getNumThreads();

/**
 * One case on every engine, back to back: wasm (1 thread: tfjs-wasm runs single-threaded
 * here), then native and PyTorch alternating at each thread count. GFLOP/s by column, best round.
 */
async function measure(label: Row, flops: number, ours: () => Promise<number>, peer: object): Promise<Row[]> {
  useNativeKernels(false);
  const wasm = flops / (await ours()) / 1e9;
  useNativeKernels(native);
  const rows: Row[] = [];
  for (const threads of threadCounts) {
    setNumThreads(threads);
    let [nativeBest, torchBest] = [Infinity, Infinity];
    for (let round = 0; round < rounds; round++) {
      if (native) nativeBest = Math.min(nativeBest, await ours());
      if (torch)
        torchBest = Math.min(
          torchBest,
          (await torch.ask<{ seconds: number }>({ ...peer, threads, seconds: minSeconds })).seconds,
        );
    }
    const nativeGflops = native ? flops / nativeBest / 1e9 : null;
    const torchGflops = torch ? flops / torchBest / 1e9 : null;
    const ratio = nativeGflops && torchGflops ? nativeGflops / torchGflops : null;
    rows.push({ ...label, threads, wasm, native: nativeGflops, torch: torchGflops, 'native/torch': ratio });
    console.log(JSON.stringify(rows.at(-1)));
  }
  return rows;
}

const matmulRows: Row[] = [];
const matmulCases: MatmulCase[] = [];
for (const shape of LINEARS) {
  for (const [pass, c] of passesOf(shape)) {
    matmulCases.push(c);
    const label = {
      case: matmulRows.length / threadCounts.length,
      layer: `${shape.model} ${shape.batch}×${shape.inF}→${shape.outF}`,
      pass,
    };
    matmulRows.push(
      ...(await measure(label, 2 * c.m * c.n * c.k, () => matmulSeconds(c, minSeconds), { op: 'matmul', ...c })),
    );
  }
}
const convRows: Row[] = [];
for (const shape of CONVS) {
  for (const pass of CONV_PASSES) {
    const label = {
      conv:
        `${shape.model} ${shape.ci}→${shape.co} k${shape.kernel} s${shape.stride} p${shape.pad}, ` +
        `${shape.n}×${shape.h}×${shape.w}`,
      pass: pass === 'backward' ? `backward (dW, db${shape.dx ? ', dx' : ''})` : 'forward (with bias)',
    };
    convRows.push(
      ...(await measure(label, convFlops(shape, pass), () => convSeconds(shape, pass, minSeconds), {
        op: 'conv',
        pass,
        ...shape,
      })),
    );
  }
}
const fusedRows: Row[] = [];
for (const c of FUSED) {
  for (const pass of ['forward', 'backward'] as const) {
    const label = { op: `${c.op} ${c.rows}×${c.cols}`, pass };
    fusedRows.push(...(await measure(label, c.rows * c.cols, () => fusedSeconds(c, pass, minSeconds), { ...c, pass })));
  }
}
torch?.close();
// after the kernels, so the probe's threads do not warm or cool the cases
const bandwidth = streamBandwidth([...new Set(matmulCases.map(productBytes))]);
const boundRows = typeof bandwidth === 'string' ? [] : memoryBoundRows(matmulRows, matmulCases, bandwidth);

const stepRows: Row[] = [];
const engines: [string, () => Promise<void>][] = [
  ['wasm', async () => void useNativeKernels(false)],
  ...(native ? [['native', async () => void useNativeKernels(true)] as [string, () => Promise<void>]] : []),
  ...(args.cpu ? [['cpu', () => setBackend('cpu')] as [string, () => Promise<void>]] : []),
];
setNumThreads(1);
for (let round = 0; round < rounds; round++) {
  for (const [engine, select] of engines) {
    await select();
    const step = await transformerStep(minSeconds);
    const best = stepRows.find((r) => r.engine === engine);
    if (!best) stepRows.push({ engine, threads: 1, ...step });
    else if (step.msPerStep < (best.msPerStep as number)) Object.assign(best, step);
  }
}
await setBackend('wasm');
useNativeKernels(native);
setNumThreads(initialThreads);

const { batch, seq, dim, heads, layers, vocab } = STEP;
const notes = [
  `Node ${process.version}, ${process.platform}-${process.arch}, ${new Date().toISOString()}; ` +
    `${nativeKernelsSummary()}; PyTorch ${torch?.version ?? 'absent'}.`,
  `GFLOP/s, mean over ≥ ${minSeconds} s after one warm-up, best of ${rounds} rounds (native and PyTorch ` +
    `alternating), case by case.`,
  '',
  '## Conv2D and its gradients as training runs them (GFLOP/s; native: nativeConv2d / nativeConv2dGrads on NCHW, ' +
    "wasm: tfjs-wasm's NHWC kernels without the transposes; PyTorch: F.conv2d, aten.convolution_backward)",
  '',
  markdownTable(convRows),
  '## Fused ops over the last axis (G values/s; wasm: tfjs ops, native: one addon pass, PyTorch: the ATen kernels)',
  '',
  markdownTable(fusedRows),
  `## Transformer training step: ${layers} pre-norm causal blocks, dim ${dim}, ${heads} heads, batch ${batch} ` +
    `× seq ${seq}, vocab ${vocab}; forward, cross-entropy, backward, AdamW (best of ${rounds} rounds, engines ` +
    `alternating)`,
  '',
  markdownTable(stepRows),
  `## What the memory gives a second thread (per matmul case: MiB = A + B + C; GB/s at 1t = MiB moved per ` +
    `second at native's 1-thread speed; GB/s for ${TARGET_SPEEDUP}× = what a ${TARGET_SPEEDUP}× speed-up at 2 ` +
    'threads would move; read/write GB/s = src/stream.c summing/filling a buffer of that size, each thread ' +
    'its half, best of 3 × ≥ 0.2 s, run after the kernels)',
  '',
  typeof bandwidth === 'string' ? `not measured: ${bandwidth}` : markdownTable(boundRows),
  '## Matmul (GFLOP/s) for the Linear layers of the DDP bench and the CLIP model',
].join('\n');
const files = await writeReport(args.out, 'kernels', matmulRows, {
  meta: {
    conv: convRows,
    fused: fusedRows,
    transformer: { config: STEP, rows: stepRows },
    memoryBound: boundRows,
    torch: torch?.version ?? null,
  },
  notes,
  chart: CHARTS.kernels.chart({}, matmulRows),
});
console.log(notes);
console.log(markdownTable(matmulRows));
console.log(`wrote ${files.join(', ')}`);

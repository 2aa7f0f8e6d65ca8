/**
 * Kernel benchmark, ddp beside PyTorch in the same run:
 * - matmul GFLOP/s for the Linear layers of the DDP bench and the CLIP model, forward (x·Wᵀ)
 *   and backward (dy·W, dyᵀ·x), at 1 and 2 threads: tfjs-wasm's kernel (`wasm`), the
 *   @ddp/native-kernels one (`native`) and PyTorch (`torch`, the kernels.py peer), case by case;
 * - conv2d forward and both gradients for the CLIP model's two convolutions, the same way;
 * - @ddp/tensor's fused ops (layer norm, GELU, softmax; forward and backward): tfjs ops, native, ATen;
 * - one training step of a small causal transformer (@ddp/nn on @ddp/autograd), wasm and native.
 * Writes results/kernels.{json,md,png}.
 *
 *   node --conditions=@ddp/source --import tsx apps/bench/src/kernels.ts [--threads 1,2] [--seconds 0.2] [--rounds 3] [--cpu]
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { crossEntropy, type Tensor, tidy } from '@ddp/autograd';
import { AdamW, Embedding, LayerNorm, Linear, Module, TransformerBlock } from '@ddp/nn';
import { markdownTable, type Row, writeReport } from '@ddp/plot';
import {
  gelu,
  geluGrad,
  getNumThreads,
  layerNorm,
  layerNormGrad,
  nativeKernelsSummary,
  setBackend,
  setNumThreads,
  softmax,
  softmaxGrad,
  tf,
  useNativeKernels,
} from '@ddp/tensor';
import { benchCommand, positiveInt, positiveIntList, positiveNumber } from './lib/flags.js';
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

/** Runs fn until minSeconds have passed (at least 2 runs after one warm-up); mean seconds per run. */
async function timeIt(fn: () => Promise<void> | void): Promise<number> {
  await fn();
  let runs = 0;
  const start = performance.now();
  while (runs < 2 || performance.now() - start < minSeconds * 1000) {
    await fn();
    runs++;
  }
  return (performance.now() - start) / 1000 / runs;
}

/** A Linear layer's products: batch rows through in → out features. */
interface LinearShape {
  model: string;
  batch: number;
  inF: number;
  outF: number;
}
const LINEARS: LinearShape[] = [
  { model: 'ddp', batch: 32, inF: 1024, outF: 2048 },
  { model: 'ddp', batch: 32, inF: 2048, outF: 2048 },
  { model: 'ddp', batch: 32, inF: 2048, outF: 1024 },
  { model: 'clip imageProj', batch: 256, inF: 3136, outF: 64 },
  { model: 'clip text mlp', batch: 512, inF: 32, outF: 128 },
  { model: 'transformer mlp', batch: 256, inF: 64, outF: 256 },
];
interface MatmulCase {
  m: number;
  n: number;
  k: number;
  ta: boolean;
  tb: boolean;
}
/** forward y = x·Wᵀ, input gradient dx = dy·W, weight gradient dW = dyᵀ·x (W is [out, in], as PyTorch's). */
const passesOf = ({ batch, inF, outF }: LinearShape): [string, MatmulCase][] => [
  ['fwd x·Wᵀ', { m: batch, n: outF, k: inF, ta: false, tb: true }],
  ['bwd dy·W', { m: batch, n: inF, k: outF, ta: false, tb: false }],
  ['bwd dyᵀ·x', { m: outF, n: inF, k: batch, ta: true, tb: false }],
];

function matmulSeconds({ m, n, k, ta, tb }: MatmulCase): Promise<number> {
  const a = tf.randomNormal(ta ? [k, m] : [m, k], 0, 1, 'float32', 1);
  const b = tf.randomNormal(tb ? [n, k] : [k, n], 0, 1, 'float32', 2);
  // wasm and cpu run kernels synchronously: the product is done when matMul returns
  return timeIt(() => tf.matMul(a, b, ta, tb).dispose()).finally(() => tf.dispose([a, b]));
}

/** PyTorch nn.Conv2d geometry; ddp runs the kernels on NHWC (tfjs's layout). */
interface ConvShape {
  model: string;
  n: number;
  h: number;
  w: number;
  ci: number;
  co: number;
  kernel: number;
  stride: number;
  pad: number;
}
const CONVS: ConvShape[] = [
  { model: 'clip stem', n: 256, h: 28, w: 56, ci: 1, co: 16, kernel: 5, stride: 2, pad: 2 },
  { model: 'clip body', n: 256, h: 14, w: 28, ci: 16, co: 32, kernel: 3, stride: 2, pad: 1 },
];
const CONV_PASSES = ['forward', 'input', 'filter'] as const;

function convSeconds(c: ConvShape, pass: (typeof CONV_PASSES)[number]): Promise<number> {
  const pad = [
    [0, 0],
    [c.pad, c.pad],
    [c.pad, c.pad],
    [0, 0],
  ] as const;
  const xShape: [number, number, number, number] = [c.n, c.h, c.w, c.ci];
  const fShape: [number, number, number, number] = [c.kernel, c.kernel, c.ci, c.co];
  const info = tf.backend_util.computeConv2DInfo(xShape, fShape, c.stride, 1, pad as never);
  const x = tf.randomNormal(xShape);
  const filter = tf.randomNormal(fShape);
  const dy = tf.randomNormal(info.outShape);
  const attrs = {
    strides: [c.stride, c.stride],
    pad,
    dataFormat: 'NHWC',
    dilations: 1,
    inputShape: xShape,
    filterShape: fShape,
  };
  const [name, inputs] = {
    forward: ['Conv2D', { x, filter }],
    input: ['Conv2DBackpropInput', { dy, filter }],
    filter: ['Conv2DBackpropFilter', { x, dy }],
  }[pass] as [string, tf.NamedTensorMap];
  const run = () => (tf.engine().runKernel(name, inputs, attrs as unknown as tf.NamedAttrMap) as tf.Tensor).dispose();
  return timeIt(run).finally(() => tf.dispose([x, filter, dy]));
}

const convFlops = (c: ConvShape) => {
  const out =
    Math.floor((c.h + 2 * c.pad - c.kernel) / c.stride + 1) * Math.floor((c.w + 2 * c.pad - c.kernel) / c.stride + 1);
  return 2 * c.n * out * c.kernel * c.kernel * c.ci * c.co;
};

/** Fused ops over rows of the last axis: a transformer's activations at batch 128 (rows × width). */
interface FusedCase {
  op: 'layerNorm' | 'gelu' | 'softmax';
  rows: number;
  cols: number;
}
const FUSED: FusedCase[] = [
  { op: 'layerNorm', rows: 4096, cols: 64 },
  { op: 'gelu', rows: 4096, cols: 256 },
  { op: 'softmax', rows: 8192, cols: 32 },
];

function fusedSeconds({ op, rows, cols }: FusedCase, pass: 'forward' | 'backward'): Promise<number> {
  const [x, dy] = [
    tf.randomNormal([rows, cols], 0, 1, 'float32', 1),
    tf.randomNormal([rows, cols], 0, 1, 'float32', 2),
  ];
  const [w, b] = [tf.ones([cols]), tf.zeros([cols])];
  const { mean, rstd } = layerNorm(x, w, b, 1e-5);
  const y = softmax(x);
  const run = {
    layerNorm: [
      () => Object.values(layerNorm(x, w, b, 1e-5)),
      () => Object.values(layerNormGrad(dy, x, mean, rstd, w)),
    ],
    gelu: [() => [gelu(x)], () => [geluGrad(dy, x)]],
    softmax: [() => [softmax(x)], () => [softmaxGrad(dy, y)]],
  }[op][pass === 'forward' ? 0 : 1];
  return timeIt(() => tf.dispose(run())).finally(() => tf.dispose([x, dy, w, b, mean, rstd, y]));
}

/** GPT-style: token + position embeddings, pre-norm causal blocks, final norm, LM head. */
class TinyGPT extends Module {
  readonly tok: Embedding;
  readonly pos: Embedding;
  readonly blocks: TransformerBlock[];
  readonly norm: LayerNorm;
  readonly head: Linear;
  constructor(
    readonly vocab: number,
    readonly seq: number,
    dim: number,
    heads: number,
    layers: number,
  ) {
    super();
    this.tok = this.registerModule('tok', new Embedding(vocab, dim));
    this.pos = this.registerModule('pos', new Embedding(seq, dim));
    this.blocks = [...Array(layers).keys()].map((i) =>
      this.registerModule(`block${i}`, new TransformerBlock(dim, heads)),
    );
    this.norm = this.registerModule('norm', new LayerNorm(dim));
    this.head = this.registerModule('head', new Linear(dim, vocab, { bias: false }));
  }
  forward(ids: number[][]): Tensor {
    const positions = [...Array(this.seq).keys()];
    let x = this.tok.forward(ids).add(this.pos.forward(positions));
    for (const block of this.blocks) x = block.forward(x);
    return this.head.forward(this.norm.forward(x));
  }
}

const STEP = { batch: 8, seq: 32, dim: 64, heads: 4, layers: 2, vocab: 64 };

async function transformerStep(): Promise<{ msPerStep: number; tokensPerSecond: number }> {
  const { batch, seq, dim, heads, layers, vocab } = STEP;
  const model = new TinyGPT(vocab, seq, dim, heads, layers);
  const optimizer = new AdamW(model.parameters(), { lr: 1e-3 });
  const ids = [...Array(batch).keys()].map((b) => [...Array(seq).keys()].map((t) => (b * 7 + t * 3) % vocab));
  const targets = ids.flatMap((row) => row.map((t) => (t + 1) % vocab));
  const seconds = await timeIt(async () => {
    const loss = tidy(() => crossEntropy(model.forward(ids).reshape([batch * seq, vocab]), targets));
    await loss.backward();
    loss.dispose();
    optimizer.step();
    optimizer.zeroGrad();
  });
  model.dispose();
  return { msPerStep: seconds * 1000, tokensPerSecond: (batch * seq) / seconds };
}

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
for (const shape of LINEARS) {
  for (const [pass, c] of passesOf(shape)) {
    const label = {
      case: matmulRows.length / threadCounts.length,
      layer: `${shape.model} ${shape.batch}×${shape.inF}→${shape.outF}`,
      pass,
    };
    matmulRows.push(...(await measure(label, 2 * c.m * c.n * c.k, () => matmulSeconds(c), { op: 'matmul', ...c })));
  }
}
const convRows: Row[] = [];
for (const shape of CONVS) {
  for (const pass of CONV_PASSES) {
    const label = {
      conv: `${shape.model} ${shape.ci}→${shape.co} k${shape.kernel} s${shape.stride} p${shape.pad}, ${shape.n}×${shape.h}×${shape.w}`,
      pass,
    };
    convRows.push(
      ...(await measure(label, convFlops(shape), () => convSeconds(shape, pass), { op: 'conv', pass, ...shape })),
    );
  }
}
const fusedRows: Row[] = [];
for (const c of FUSED) {
  for (const pass of ['forward', 'backward'] as const) {
    const label = { op: `${c.op} ${c.rows}×${c.cols}`, pass };
    fusedRows.push(...(await measure(label, c.rows * c.cols, () => fusedSeconds(c, pass), { ...c, pass })));
  }
}
torch?.close();

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
    const step = await transformerStep();
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
  `Node ${process.version}, ${process.platform}-${process.arch}, ${new Date().toISOString()}; ${nativeKernelsSummary()}; PyTorch ${torch?.version ?? 'absent'}.`,
  `GFLOP/s, mean over ≥ ${minSeconds} s after one warm-up, best of ${rounds} rounds (native and PyTorch alternating), case by case.`,
  '',
  '## Conv2D and its gradients (GFLOP/s; ddp NHWC kernels, PyTorch NCHW F.conv2d / torch.nn.grad)',
  '',
  markdownTable(convRows),
  '## Fused ops over the last axis (G values/s; wasm: tfjs ops, native: one addon pass, PyTorch: the ATen kernels)',
  '',
  markdownTable(fusedRows),
  `## Transformer training step: ${layers} pre-norm causal blocks, dim ${dim}, ${heads} heads, batch ${batch} × seq ${seq}, vocab ${vocab}; forward, cross-entropy, backward, AdamW (best of ${rounds} rounds, engines alternating)`,
  '',
  markdownTable(stepRows),
  '## Matmul (GFLOP/s) for the Linear layers of the DDP bench and the CLIP model',
].join('\n');
const files = await writeReport(args.out, 'kernels', matmulRows, {
  meta: {
    conv: convRows,
    fused: fusedRows,
    transformer: { config: STEP, rows: stepRows },
    torch: torch?.version ?? null,
  },
  notes,
  chart: {
    x: 'case',
    y: 'native/torch',
    series: 'threads',
    title: 'matmul GFLOP/s, native ÷ PyTorch, per layer and pass',
  },
});
console.log(notes);
console.log(markdownTable(matmulRows));
console.log(`wrote ${files.join(', ')}`);

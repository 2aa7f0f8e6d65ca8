/**
 * Kernel benchmark: matmul GFLOP/s and one training step of a small causal transformer
 * (@ddp/nn modules on @ddp/autograd) on every tfjs backend that initialises here.
 * Writes results/kernels.{json,md,png}.
 *
 *   node --conditions=@ddp/source --import tsx apps/bench/src/kernels.ts [--backends cpu,wasm] [--sizes 128,256,512] [--seconds 0.5]
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { crossEntropy, type Tensor, tidy } from '@ddp/autograd';
import { markdownTable, type Row, writeReport } from '@ddp/plot';
import { AdamW, Embedding, LayerNorm, Linear, Module, TransformerBlock } from '@ddp/nn';
import { type BackendName, getBackend, setBackend, tf } from '@ddp/tensor';

const { values: args } = parseArgs({
  options: {
    backends: { type: 'string', default: 'cpu,wasm,tensorflow' },
    sizes: { type: 'string', default: '128,256,512' },
    seconds: { type: 'string', default: '0.5' },
    out: { type: 'string', default: join(dirname(fileURLToPath(import.meta.url)), '..', 'results') },
  },
});
const minSeconds = Number(args.seconds);

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

async function matmulGflops(n: number): Promise<number> {
  const a = tf.randomNormal([n, n], 0, 1, 'float32', 1);
  const b = tf.randomNormal([n, n], 0, 1, 'float32', 2);
  const seconds = await timeIt(async () => {
    const c = tf.matMul(a, b);
    await c.data(); // wait for the kernel, whatever the backend
    c.dispose();
  });
  a.dispose();
  b.dispose();
  return (2 * n ** 3) / seconds / 1e9;
}

/** GPT-style: token + position embeddings, pre-norm causal blocks, final norm, LM head. */
class TinyGPT extends Module {
  readonly tok: Embedding;
  readonly pos: Embedding;
  readonly blocks: TransformerBlock[];
  readonly norm: LayerNorm;
  readonly head: Linear;
  constructor(readonly vocab: number, readonly seq: number, dim: number, heads: number, layers: number) {
    super();
    this.tok = this.registerModule('tok', new Embedding(vocab, dim));
    this.pos = this.registerModule('pos', new Embedding(seq, dim));
    this.blocks = [...Array(layers).keys()].map((i) => this.registerModule(`block${i}`, new TransformerBlock(dim, heads)));
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

const matmulRows: Row[] = [];
const stepRows: Row[] = [];
for (const name of args.backends.split(',') as BackendName[]) {
  try {
    await setBackend(name);
  } catch (err) {
    console.log(`skipping backend ${name}: ${(err as Error).message}`);
    continue;
  }
  const backend = getBackend();
  for (const n of args.sizes.split(',').map(Number)) matmulRows.push({ backend, n, gflops: await matmulGflops(n) });
  const { msPerStep, tokensPerSecond } = await transformerStep();
  stepRows.push({ backend, msPerStep, tokensPerSecond });
  console.log(backend, JSON.stringify(matmulRows.filter((r) => r.backend === backend)), `${msPerStep.toFixed(1)} ms/step`);
}

const { batch, seq, dim, heads, layers, vocab } = STEP;
const notes = [
  `Node ${process.version}, ${process.platform}-${process.arch}, ${new Date().toISOString()}. Backends that do not initialise here are skipped.`,
  '',
  `Matmul: n×n float32 product (tf.matMul), GFLOP/s = 2n³ / time, ≥ ${minSeconds} s per size after one warm-up.`,
  '',
  `Transformer training step: ${layers} pre-norm causal blocks (@ddp/nn TransformerBlock on @ddp/autograd), dim ${dim}, ${heads} heads,`,
  `batch ${batch} × seq ${seq}, vocab ${vocab}; forward, cross-entropy, backward, AdamW step.`,
  '',
  markdownTable(stepRows),
  'Matmul:',
].join('\n');
const files = await writeReport(args.out, 'kernels', matmulRows, {
  meta: { transformer: { config: STEP, rows: stepRows } },
  notes,
  chart: { x: 'n', y: 'gflops', series: 'backend', title: 'matmul GFLOP/s per tfjs backend', logX: true },
});
console.log(notes);
console.log(markdownTable(matmulRows));
console.log(`wrote ${files.join(', ')}`);

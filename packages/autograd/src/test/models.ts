// Test-only: a 3-layer MLP and a small causal transformer built from the ops directly.
import { tf } from '@ddp/tensor';
import {
  checkpoint,
  crossEntropy,
  embedding,
  fromTf,
  gelu,
  layerNorm,
  linear,
  maskedFill,
  matmul,
  ones,
  randn,
  softmax,
  type Tensor,
  tidy,
  zeros,
} from '../index.js';
import { disposeAll } from './utils.js';

/** A parameter factory: scaled normal initial values, reproducible per model from `seed`. */
function paramFactory(seed: number): (shape: number[], scale: number) => Tensor {
  return (shape, scale) =>
    fromTf(
      tf.tidy(() => tf.mul(tf.randomNormal(shape, 0, 1, 'float32', seed++), scale)),
      { requiresGrad: true },
    );
}

export interface Model {
  params: Tensor[];
  /** Builds the loss for one batch; the caller backwards and disposes it. */
  loss(): Tensor;
  dispose(): void;
}

/** SGD: p -= lr * grad, then zero the grads. */
export function sgdStep(params: Tensor[], lr: number): void {
  for (const p of params) {
    p.data = tf.tidy(() => tf.sub(p.data, tf.mul(p.grad!, lr)));
    p.grad = null;
  }
}

export function mlp(): Model {
  const param = paramFactory(1000);
  const dims = [6, 16, 16, 3];
  const ws = dims.slice(1).map((d, i) => param([d, dims[i]], 1 / Math.sqrt(dims[i])));
  const bs = dims.slice(1).map((d) => zeros([d], { requiresGrad: true }));
  const x = randn([12, 6], { seed: 7 });
  const labels = tf.tidy(() =>
    tf.cast(tf.argMax(tf.matMul(x.data, tf.randomNormal([6, 3], 0, 1, 'float32', 8)), 1), 'int32'),
  );
  return {
    params: [...ws, ...bs],
    loss: () =>
      tidy(() => {
        let h = x;
        ws.forEach((w, i) => {
          h = linear(h, w, bs[i]);
          if (i < ws.length - 1) h = h.relu();
        });
        return crossEntropy(h, labels);
      }),
    dispose: () => {
      disposeAll(...ws, ...bs, x);
      labels.dispose();
    },
  };
}

export interface TransformerOptions {
  batch?: number;
  seq?: number;
  dim?: number;
  vocab?: number;
  checkpointBlocks?: boolean;
}

/** A 2-block pre-norm causal transformer (2 heads) learning to continue a cyclic sequence. */
export function transformer(opts: TransformerOptions = {}): Model {
  const { batch = 4, seq = 6, dim = 8, vocab = 7, checkpointBlocks = false } = opts;
  const param = paramFactory(2000);
  const heads = 2;
  const hd = dim / heads;
  const wte = param([vocab, dim], 0.5);
  const wpe = param([seq, dim], 0.1);
  const blocks = [0, 1].map(() => ({
    ln1w: ones([dim], { requiresGrad: true }),
    ln1b: zeros([dim], { requiresGrad: true }),
    wqkv: param([3 * dim, dim], 1 / Math.sqrt(dim)),
    wo: param([dim, dim], 1 / Math.sqrt(dim)),
    ln2w: ones([dim], { requiresGrad: true }),
    ln2b: zeros([dim], { requiresGrad: true }),
    w1: param([4 * dim, dim], 1 / Math.sqrt(dim)),
    w2: param([dim, 4 * dim], 1 / Math.sqrt(4 * dim)),
  }));
  const lnf = [ones([dim], { requiresGrad: true }), zeros([dim], { requiresGrad: true })] as const;
  const starts = [...Array(batch).keys()].map((b) => (b * 3) % vocab);
  const tokens = starts.map((s) => [...Array(seq).keys()].map((t) => (s + t) % vocab));
  const targets = tf.tensor(
    starts.flatMap((s) => [...Array(seq).keys()].map((t) => (s + t + 1) % vocab)),
    undefined,
    'int32',
  );
  const future = tf.tidy(() => tf.greater(tf.expandDims(tf.range(0, seq), 0), tf.expandDims(tf.range(0, seq), 1)));

  const block =
    (b: (typeof blocks)[number]) =>
    (x: Tensor): Tensor => {
      const heads4 = (t: Tensor) => t.reshape([batch, seq, heads, hd]).permute([0, 2, 1, 3]);
      const [q, k, v] = linear(layerNorm(x, b.ln1w, b.ln1b), b.wqkv)
        .chunk(3, -1)
        .map(heads4) as [Tensor, Tensor, Tensor];
      const att = softmax(maskedFill(matmul(q, k, { transposeB: true }).div(Math.sqrt(hd)), future, -Infinity));
      const y = matmul(att, v).permute([0, 2, 1, 3]).reshape([batch, seq, dim]);
      const h = x.add(linear(y, b.wo));
      return h.add(linear(gelu(linear(layerNorm(h, b.ln2w, b.ln2b), b.w1)), b.w2));
    };

  const params = [wte, wpe, ...blocks.flatMap((b) => Object.values(b)), ...lnf];
  return {
    params,
    loss: () =>
      tidy(() => {
        let x = embedding(tokens, wte).add(wpe);
        for (const b of blocks) x = checkpointBlocks ? checkpoint(block(b), x) : block(b)(x);
        const logits = linear(layerNorm(x, lnf[0], lnf[1]), wte).reshape([batch * seq, vocab]);
        return crossEntropy(logits, targets);
      }),
    dispose: () => {
      disposeAll(...params);
      targets.dispose();
      future.dispose();
    },
  };
}

import { readFileSync } from 'node:fs';
import { setBackend, tf } from '@ddp/tensor';
import { afterAll, describe, expect, it } from 'vitest';
import {
  batchNormStats,
  conv2d,
  crossEntropy,
  embedding,
  gelu,
  layerNorm,
  linear,
  logSoftmax,
  maskedFill,
  matmul,
  maxPool2d,
  softmax,
  type Tensor,
  tensor,
  tidy,
} from './index.js';

interface Golden {
  inputs: Record<string, { shape: number[]; data: number[] } | number[] | number[][]>;
  outputs: Record<string, { shape: number[]; data: number[] }>;
}
const load = (name: string): Golden =>
  JSON.parse(readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), 'utf8'));

function causalSelfAttention(x: Tensor, wq: Tensor, wk: Tensor, wv: Tensor, wo: Tensor): Tensor {
  const [b, t, d] = x.shape as [number, number, number];
  const heads = 2;
  const hd = d / heads;
  const split = (w: Tensor) => linear(x, w).reshape([b, t, heads, hd]).permute([0, 2, 1, 3]);
  const scores = matmul(split(wq), split(wk), { transposeB: true }).div(Math.sqrt(hd));
  const future = tf.tidy(() => tf.greater(tf.expandDims(tf.range(0, t), 0), tf.expandDims(tf.range(0, t), 1)));
  const att = softmax(maskedFill(scores, future, -Infinity));
  future.dispose();
  const y = matmul(att, split(wv)).permute([0, 2, 1, 3]).reshape([b, t, d]);
  return linear(y, wo);
}

/** Each op: which inputs are differentiable leaves, and how to compute y from them. */
const cases: Record<
  string,
  {
    leaves: string[];
    run: (v: Record<string, Tensor>, raw: Golden['inputs']) => Tensor;
    grads?: Record<string, string>;
  }
> = {
  op_causal_self_attention: {
    leaves: ['x', 'Wq', 'Wk', 'Wv', 'Wo'],
    run: (v) => causalSelfAttention(v.x, v.Wq, v.Wk, v.Wv, v.Wo),
  },
  op_conv2d: { leaves: ['x', 'w', 'b'], run: (v) => conv2d(v.x, v.w, v.b, { padding: 1 }) },
  op_conv2d_s2: { leaves: ['x', 'w'], run: (v) => conv2d(v.x, v.w, null, { stride: 2 }) },
  op_cross_entropy: { leaves: ['logits'], run: (v, raw) => crossEntropy(v.logits, raw.labels as number[]) },
  op_embedding: { leaves: ['table'], run: (v, raw) => embedding(raw.idx as number[][], v.table) },
  op_gelu_erf: { leaves: ['x'], run: (v) => gelu(v.x) },
  op_gelu_tanh: { leaves: ['x'], run: (v) => gelu(v.x, { approximate: 'tanh' }) },
  op_layernorm: { leaves: ['x', 'weight', 'bias'], run: (v) => layerNorm(v.x, v.weight, v.bias) },
  op_linear: { leaves: ['x', 'W', 'b'], run: (v) => linear(v.x, v.W, v.b) },
  op_log_softmax: { leaves: ['x'], run: (v) => logSoftmax(v.x) },
  op_maxpool2d: { leaves: ['x'], run: (v) => maxPool2d(v.x, 2) },
  // fixtures/make_maxpool2d_fixtures.py: all-negative windows, ties, overlap, padding
  op_maxpool2d_negative_k3_s2_p1: { leaves: ['x'], run: (v) => maxPool2d(v.x, 3, { stride: 2, padding: 1 }) },
  op_maxpool2d_ties_k2x3_s1: { leaves: ['x'], run: (v) => maxPool2d(v.x, [2, 3], { stride: 1 }) },
  // fixtures/make_fused_node_fixtures.py: the fused nodes' other paths
  op_layernorm_last2: { leaves: ['x', 'weight', 'bias'], run: (v) => layerNorm(v.x, v.weight, v.bias) },
  op_layernorm_no_affine: { leaves: ['x'], run: (v) => layerNorm(v.x) },
  op_linear_1d: { leaves: ['x', 'W', 'b'], run: (v) => linear(v.x, v.W, v.b) },
  op_linear_3d_no_bias: { leaves: ['x', 'W'], run: (v) => linear(v.x, v.W) },
  op_softmax_last: { leaves: ['x'], run: (v) => softmax(v.x) },
  op_softmax_dim1: { leaves: ['x'], run: (v) => softmax(v.x, 1) },
  ...Object.fromEntries(
    (['mean', 'sum', 'none'] as const).map((reduction) => [
      `op_cross_entropy_ignore_${reduction}`,
      {
        leaves: ['logits'],
        run: (v: Record<string, Tensor>, raw: Golden['inputs']) =>
          crossEntropy(v.logits, raw.labels as number[], { reduction }),
      },
    ]),
  ),
  batchnorm2d_n4_c3: {
    leaves: ['x', 'weight', 'bias'],
    grads: { x: 'dx', weight: 'dweight', bias: 'dbias' },
    run: (v) => {
      const { mean, var: variance } = batchNormStats(v.x, [0, 2, 3]);
      const c = [1, -1, 1, 1];
      const xhat = v.x.sub(mean.reshape(c)).div(variance.add(1e-5).sqrt().reshape(c));
      return xhat.mul(v.weight.reshape(c)).add(v.bias.reshape(c));
    },
  },
};

function expectClose(actual: tf.Tensor | null, expected: { shape: number[]; data: number[] }, what: string): void {
  expect(actual, what).not.toBeNull();
  expect(actual!.shape, what).toEqual(expected.shape);
  const a = actual!.dataSync();
  // |a - e| <= 1e-5 + 1e-4 |e|, as a ratio that must stay below 1e-4
  const worst = Math.max(...expected.data.map((e, i) => Math.abs(a[i] - e) / (1e-5 / 1e-4 + Math.abs(e))));
  expect(worst, `${what}: worst relative error`).toBeLessThan(1e-4);
}

for (const backend of ['cpu', 'wasm'] as const) {
  describe(`golden PyTorch values on ${backend}`, () => {
    afterAll(async () => setBackend('wasm'));
    for (const [name, spec] of Object.entries(cases)) {
      it(name, async () => {
        await setBackend(backend);
        const g = load(name);
        const before = tf.memory().numTensors;
        const leaves: Record<string, Tensor> = {};
        for (const k of spec.leaves) {
          const t = g.inputs[k] as { shape: number[]; data: number[] };
          leaves[k] = tensor(t.data, t.shape, { requiresGrad: true });
        }
        const y = tidy(() => spec.run(leaves, g.inputs));
        expectClose(y.data, g.outputs.y, `${name} y`);
        const dy = g.inputs.dy as { shape: number[]; data: number[] };
        const dyT = tf.tensor(dy.data, dy.shape);
        await y.backward(dyT);
        dyT.dispose();
        y.dispose();
        for (const k of spec.leaves)
          expectClose(leaves[k].grad, g.outputs[spec.grads?.[k] ?? `grad_${k}`], `${name} grad_${k}`);
        for (const t of Object.values(leaves)) t.dispose();
        expect(tf.memory().numTensors, 'tensors leaked').toBe(before);
      });
    }
  });
}

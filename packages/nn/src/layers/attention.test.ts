import { fromTf, tidy } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { Generator } from '../generator.js';
import { type GoldenTensor, goldenToTf, loadFixture, maxAbsDiff } from '../test/fixtures.js';
import { MultiheadAttention } from './attention.js';
import { TransformerBlock } from './transformer.js';

interface AttnGolden {
  inputs: Record<'x' | 'Wq' | 'Wk' | 'Wv' | 'Wo' | 'dy', GoldenTensor>;
  outputs: Record<'y' | 'grad_x' | 'grad_Wq' | 'grad_Wk' | 'grad_Wv' | 'grad_Wo', GoldenTensor>;
}

describe('MultiheadAttention', () => {
  it('reproduces PyTorch causal self-attention (2 heads, no bias) and its gradients', async () => {
    const g = loadFixture<AttnGolden>('op_causal_self_attention');
    const mha = new MultiheadAttention(4, 2, { bias: false, causal: true });
    const w = (k: 'Wq' | 'Wk' | 'Wv' | 'Wo') => goldenToTf(g.inputs[k]);
    const state = { in_proj_weight: tf.concat([w('Wq'), w('Wk'), w('Wv')], 0), 'out_proj.weight': w('Wo') };
    mha.loadStateDict(state);
    tf.dispose(Object.values(state));
    const x = fromTf(goldenToTf(g.inputs.x), { requiresGrad: true });
    const dy = goldenToTf(g.inputs.dy);
    const y = tidy(() => mha.forward(x));
    expect(maxAbsDiff(y.dataSync(), g.outputs.y.data)).toBeLessThan(1e-5);
    await y.backward(dy);
    expect(maxAbsDiff((x.grad as tf.Tensor).dataSync(), g.outputs.grad_x.data)).toBeLessThan(1e-5);
    const dIn = (mha.inProjWeight.grad as tf.Tensor).dataSync();
    expect(
      maxAbsDiff(dIn, [...g.outputs.grad_Wq.data, ...g.outputs.grad_Wk.data, ...g.outputs.grad_Wv.data]),
    ).toBeLessThan(1e-5);
    expect(maxAbsDiff((mha.outProj.weight.grad as tf.Tensor).dataSync(), g.outputs.grad_Wo.data)).toBeLessThan(1e-5);
    for (const t of [x, y]) t.dispose();
    dy.dispose();
    mha.dispose();
  });

  it('keeps PyTorch parameter names and makes position i independent of later positions when causal', () => {
    const mha = new MultiheadAttention(8, 2, { causal: true, generator: new Generator(3) });
    expect([...mha.stateDict().keys()]).toEqual(['in_proj_weight', 'in_proj_bias', 'out_proj.weight', 'out_proj.bias']);
    const a = tf.randomNormal([1, 5, 8], 0, 1, 'float32', 1);
    const b = tf.tidy(() =>
      tf.concat([tf.slice(a, [0, 0, 0], [1, 3, 8]), tf.randomNormal([1, 2, 8], 0, 1, 'float32', 2)], 1),
    );
    const [ya, yb] = [a, b].map((t) => {
      const x = fromTf(t);
      return tidy(() => mha.forward(x));
    }) as [ReturnType<typeof fromTf>, ReturnType<typeof fromTf>];
    const first3 = (t: tf.Tensor) => tf.tidy(() => Array.from(tf.slice(t, [0, 0, 0], [1, 3, 8]).dataSync()));
    expect(maxAbsDiff(first3(ya.data), first3(yb.data))).toBeLessThan(1e-6);
    expect(maxAbsDiff(ya.dataSync(), yb.dataSync())).toBeGreaterThan(1e-3);
    for (const t of [ya, yb]) t.dispose();
    mha.dispose();
  });
  it('gives the same output and gradients with one input (packed projection) as with separate query, key, value', async () => {
    const mha = new MultiheadAttention(8, 2, { causal: true, generator: new Generator(4) });
    const base = tf.randomNormal([2, 3, 8], 0, 1, 'float32', 7);
    const dy = tf.randomNormal([2, 3, 8], 0, 1, 'float32', 8);
    const run = async (separate: boolean) => {
      const leaf = () => fromTf(tf.clone(base), { requiresGrad: true });
      const x = leaf();
      const [k, v] = separate ? [leaf(), leaf()] : [x, x];
      const y = tidy(() => mha.forward(x, k, v));
      await y.backward(dy);
      const dx = tf.tidy(() =>
        [x, ...(separate ? [k, v] : [])].reduce((a, t) => tf.add(a, t.grad as tf.Tensor), tf.zeros(base.shape)),
      );
      const out = {
        y: Array.from(y.dataSync()),
        dx: Array.from(dx.dataSync()),
        dIn: Array.from((mha.inProjWeight.grad as tf.Tensor).dataSync()),
      };
      mha.zeroGrad();
      for (const t of new Set([x, k, v, y])) t.dispose();
      dx.dispose();
      return out;
    };
    const packed = await run(false);
    const before = tf.memory().numTensors;
    const separate = await run(true);
    expect(tf.memory().numTensors).toBe(before);
    expect(maxAbsDiff(packed.y, separate.y)).toBeLessThan(1e-5);
    expect(maxAbsDiff(packed.dx, separate.dx)).toBeLessThan(1e-5);
    expect(maxAbsDiff(packed.dIn, separate.dIn)).toBeLessThan(1e-5);
    tf.dispose([base, dy]);
    mha.dispose();
  });
});

describe('TransformerBlock', () => {
  it('is pre-norm with PyTorch-style names, trains, and keeps numTensors flat', async () => {
    const block = new TransformerBlock(8, 2, { generator: new Generator(0) });
    expect([...block.stateDict().keys()]).toEqual([
      'ln1.weight',
      'ln1.bias',
      'attn.in_proj_weight',
      'attn.in_proj_bias',
      'attn.out_proj.weight',
      'attn.out_proj.bias',
      'ln2.weight',
      'ln2.bias',
      'mlp.0.weight',
      'mlp.0.bias',
      'mlp.2.weight',
      'mlp.2.bias',
    ]);
    const x = fromTf(tf.randomNormal([2, 4, 8], 0, 1, 'float32', 5));
    const target = fromTf(tf.randomNormal([2, 4, 8], 0, 1, 'float32', 6));
    const counts: number[] = [];
    const losses: number[] = [];
    for (let step = 0; step < 6; step++) {
      const loss = tidy(() => block.forward(x).sub(target).square().mean());
      await loss.backward();
      losses.push(loss.item());
      loss.dispose();
      for (const p of block.parameters()) {
        p.data = tf.tidy(() => tf.sub(p.data, tf.mul(p.grad as tf.Tensor, 0.05)));
        p.grad = null;
      }
      counts.push(tf.memory().numTensors);
    }
    expect(new Set(counts.slice(1)).size).toBe(1);
    expect(losses[5]).toBeLessThan(losses[0]);
    for (const t of [x, target]) t.dispose();
    block.dispose();
  });
});

import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { AutogradArgumentError, autocast, checkpoint, linear, noGrad, randn, sum, type Tensor, tidy } from './index.js';
import { transformer } from './test/models.js';
import { expectAllClose } from './test/utils.js';

/** One backward of the transformer: its gradients and the peak tf.memory().numBytes seen inside backward. */
async function gradsAndPeak(checkpointBlocks: boolean) {
  const model = transformer({ batch: 8, seq: 8, dim: 16, checkpointBlocks });
  let peak = 0;
  const sample = (): void => {
    peak = Math.max(peak, tf.memory().numBytes);
  };
  const hooks = model.params.map((p) => p.registerHook(() => sample()));
  const loss = model.loss();
  loss.registerHook(() => sample());
  await loss.backward();
  const grads = model.params.map((p) => Array.from(p.grad!.dataSync()));
  loss.dispose();
  for (const h of hooks) h.remove();
  model.dispose();
  return { grads, peak };
}

describe('checkpoint', () => {
  it('gives the plain gradients with a lower peak tensor memory on the transformer', async () => {
    const before = tf.memory().numTensors;
    const plain = await gradsAndPeak(false);
    const ckpt = await gradsAndPeak(true);
    for (const [i, g] of plain.grads.entries()) expectAllClose(ckpt.grads[i], g, 5);
    console.log(`peak numBytes inside backward: plain ${plain.peak}, checkpointed ${ckpt.peak}`);
    expect(ckpt.peak).toBeLessThan(plain.peak);
    expect(tf.memory().numTensors).toBe(before);
  });

  it("recomputes under the forward's autocast, whatever autocast backward runs in (as torch's checkpoint)", async () => {
    // before: a bfloat16 forward was recomputed in float32 when backward ran outside autocast (and a float32
    // forward in float16 inside it): w's gradient was 1.2e-2 off the plain one
    for (const [forwardIn, backwardIn] of [
      ['bfloat16', null],
      [null, 'float16'],
    ] as const) {
      const grads: number[][] = [];
      for (const wrap of [false, true]) {
        const w = randn([4, 4], { seed: 1, requiresGrad: true });
        const x = randn([3, 4], { seed: 2, requiresGrad: true });
        const segment = (a: Tensor) => linear(a, w).tanh();
        const run = () => (wrap ? checkpoint(segment, x) : segment(x));
        const out = autocast({ dtype: forwardIn ?? undefined, enabled: forwardIn !== null }, run);
        const loss = sum(out);
        await autocast({ dtype: backwardIn ?? undefined, enabled: backwardIn !== null }, () => loss.backward());
        grads.push(Array.from(w.grad!.dataSync()));
        for (const t of [w, x, out, loss]) t.dispose();
      }
      expect(grads[1], `forward ${forwardIn}, backward ${backwardIn}`).toEqual(grads[0]);
    }
  });

  // torch takes non-tensor arguments; here they failed untyped (`t.clone is not a function`)
  it('refuses an input that is not a Tensor, with a typed error', () => {
    const x = randn([2], { seed: 1, requiresGrad: true });
    const scaled = (a: Tensor, k: Tensor) => a.mul(k);
    expect(() => checkpoint(scaled, x, 3 as unknown as Tensor)).toThrow(AutogradArgumentError);
    expect(() => checkpoint(scaled, x, 3 as unknown as Tensor)).toThrow(/checkpoint: input 1 is not a Tensor/);
    x.dispose();
  });

  // probe CM: a forward inside tidy (the training-step pattern) disposed what the segment closed over, and
  // its recomputation raised TensorDisposedError (torch's reads them); the plain path leaked its intermediates
  it('recomputes with the tensors it captured as they were, a tidy having disposed them; as without it', async () => {
    const before = tf.memory().numTensors;
    const grads: number[][][] = [];
    for (const wrap of [false, true]) {
      const w = randn([3], { seed: 1, requiresGrad: true });
      const x = randn([3], { seed: 2, requiresGrad: true });
      const loss = tidy(() => {
        const h = w.mul(3); // a non-leaf: its gradient reaches w through the recomputation
        const shift = randn([3], { seed: 3 }); // a constant
        const segment = (a: Tensor) => a.tanh().add(a.mul(h)).add(shift);
        return sum(wrap ? checkpoint(segment, x) : segment(x));
      });
      await loss.backward();
      grads.push([w, x].map((t) => Array.from(t.grad!.dataSync())));
      for (const t of [w, x, loss]) t.dispose();
    }
    expect(grads[1]).toEqual(grads[0]);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('frees what it holds when its output goes unbackwarded, and runs plainly without leaking', () => {
    const before = tf.memory().numTensors;
    const w = randn([3], { seed: 1, requiresGrad: true });
    const x = randn([3], { seed: 2, requiresGrad: true });
    const constant = randn([3], { seed: 3 });
    const h = w.mul(3);
    checkpoint((a) => a.mul(h).tanh(), x).dispose();
    h.dispose();
    noGrad(() => checkpoint((a) => a.mul(w).tanh().add(1), constant)).dispose();
    checkpoint((a) => a.mul(w).tanh().add(1), constant).dispose(); // no input requires grad: runs plainly
    for (const t of [w, x, constant]) t.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  // review: a captured non-leaf also used outside the segment: backward reached its graph twice (GraphFreedError
  // advising retainGraph); torch takes it, ddp says to pass it as an input
  it('a captured non-leaf used outside the segment too: a typed error saying to pass it as an input', async () => {
    const w = randn([3], { seed: 1, requiresGrad: true });
    const x = randn([3], { seed: 2, requiresGrad: true });
    const h = w.mul(3);
    const loss = sum(checkpoint((a) => a.mul(h).tanh(), x).add(h));
    await expect(loss.backward()).rejects.toThrow(AutogradArgumentError);
    for (const t of [w, x, h, loss]) t.dispose();
  });

  // probe CP: an autocast({}) inside the segment was recomputed in the dtype of the region backward ran in
  it("recomputes in the forward's autocast region, its dtype kept when disabled", async () => {
    const grads: number[][] = [];
    for (const [wrap, forwardIn, backwardIn] of [
      [false, { dtype: 'float16', enabled: false }, {}],
      [true, { dtype: 'float16', enabled: false }, { dtype: 'bfloat16' }],
      [false, {}, {}],
      [true, { enabled: false }, { dtype: 'float16' }],
    ] as const) {
      const w = randn([4, 4], { seed: 1, requiresGrad: true });
      const x = randn([3, 4], { seed: 2, requiresGrad: true });
      const segment = (a: Tensor) => autocast({}, () => linear(a, w).tanh());
      const loss = autocast(forwardIn, () => sum(wrap ? checkpoint(segment, x) : segment(x)));
      await autocast(backwardIn, () => loss.backward());
      grads.push(Array.from(w.grad!.dataSync()));
      for (const t of [w, x, loss]) t.dispose();
    }
    expect(grads[1]).toEqual(grads[0]);
    expect(grads[3]).toEqual(grads[2]);
  });

  // probe CP: a segment handing back a tensor it captured disposed the caller's
  it('a segment that hands back a tensor it captured leaves it to the caller', () => {
    const h = randn([3], { seed: 3 });
    const x = randn([3], { seed: 4, requiresGrad: true });
    checkpoint(() => h, x).dispose();
    expect(h.isDisposed).toBe(false);
    for (const t of [h, x]) t.dispose();
  });

  // review: the recomputation's backward freed a captured non-leaf's graph whatever the outer retainGraph
  it('a captured non-leaf, backwarded twice with retainGraph: gradients as without checkpoint', async () => {
    const grads: number[][] = [];
    for (const wrap of [false, true]) {
      const w = randn([3], { seed: 1, requiresGrad: true });
      const x = randn([3], { seed: 2, requiresGrad: true });
      const h = w.mul(3);
      const segment = (a: Tensor) => a.mul(h).tanh();
      const loss = sum(wrap ? checkpoint(segment, x) : segment(x));
      await loss.backward(undefined, { retainGraph: true });
      await loss.backward(undefined, { retainGraph: true });
      grads.push([...w.grad!.dataSync(), ...x.grad!.dataSync()]);
      for (const t of [w, x, h, loss]) t.dispose();
    }
    expect(grads[1]).toEqual(grads[0]);
  });
});

import {
  add,
  exp,
  fromTf,
  l2Normalize,
  logSigmoid,
  matmul,
  mul,
  neg,
  sum,
  type Tensor,
  tensor,
  tidy,
} from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { clipLoss, clipLossFullMatrix } from './clip-loss.js';
import { ContrastiveError } from './errors.js';
import { ntXentLoss } from './ntxent.js';
import { clampLogitScale_, logitScaleFromLog } from './scale.js';
import { sigLipLoss } from './siglip.js';
import { arrayOf, type Case, golden, leavesFor, runCase } from './test/cases.js';
import { expectClose } from './test/expect.js';

const single = (c: Omit<Case, 'split'>, total: number): Case => ({ ...c, split: [total] });

describe('single process against PyTorch', () => {
  const clipCases = [
    ['clip', 'clip_loss_b8_d4', 8],
    ['clip', 'clip_loss_b12_d6', 12],
    ['clip-full', 'clip_loss_b8_d4', 8],
  ] as const;
  for (const [kind, fixture, total] of clipCases) {
    it(`${kind === 'clip' ? 'clipLoss' : 'clipLossFullMatrix'} reproduces ${fixture}`, async () => {
      const g = golden(fixture);
      const { loss, grads, leaves } = await runCase(single({ name: fixture, kind, fixture }, total));
      for (const t of Object.values(leaves)) t.dispose();
      expectClose([loss], arrayOf(g.outputs.loss).data, 'loss');
      expectClose(grads.image_features, arrayOf(g.outputs.grad_image_features).data, 'grad image');
      expectClose(grads.text_features, arrayOf(g.outputs.grad_text_features).data, 'grad text');
      expectClose(grads.logit_scale_log, arrayOf(g.outputs.grad_logit_scale_log).data, 'grad logit scale');
    });
  }

  it('ntXentLoss reproduces ntxent_b6_d5', async () => {
    const g = golden('ntxent_b6_d5');
    const { loss, grads, leaves } = await runCase(
      single({ name: 'ntxent', kind: 'ntxent', fixture: 'ntxent_b6_d5' }, 6),
    );
    for (const t of Object.values(leaves)) t.dispose();
    expectClose([loss], arrayOf(g.outputs.loss).data, 'loss');
    expectClose(grads.z1, arrayOf(g.outputs.grad_z1).data, 'grad z1');
    expectClose(grads.z2, arrayOf(g.outputs.grad_z2).data, 'grad z2');
  });
});

/** SigLIP written the obvious way: the whole [batch × batch] logit matrix, labels 2I − 1. */
function sigLipReference(img: Tensor, txt: Tensor, scaleLog: Tensor, bias: Tensor): Tensor {
  return tidy(() => {
    const n = img.shape[0];
    const logits = add(mul(matmul(l2Normalize(img), l2Normalize(txt), { transposeB: true }), exp(scaleLog)), bias);
    const signs = fromTf(tf.tidy(() => tf.sub(tf.mul(tf.eye(n), 2), 1)));
    return mul(neg(sum(logSigmoid(mul(logits, signs)))), 1 / n);
  });
}

describe('sigLipLoss', () => {
  it('in a world of one equals the full-matrix sigmoid loss and its gradients', async () => {
    const c: Case = { name: 'siglip', kind: 'siglip', split: [10] };
    const ours = await runCase(c);
    const ref = leavesFor(c);
    const loss = sigLipReference(ref.image, ref.text, ref.scaleLog, ref.bias);
    await loss.backward();
    expectClose([ours.loss], [loss.item()], 'loss');
    for (const k of Object.keys(ref)) expectClose(ours.grads[k], Array.from(ref[k].grad!.dataSync()), `grad ${k}`);
    loss.dispose();
    for (const t of [...Object.values(ref), ...Object.values(ours.leaves)]) t.dispose();
  });
});

describe('temperature', () => {
  it('is exp of the parameter, clamped at 100 with no gradient above the ceiling', async () => {
    const low = tensor([Math.log(20)], [], { requiresGrad: true });
    const high = tensor([5], [], { requiresGrad: true });
    const [a, b] = [logitScaleFromLog(low), logitScaleFromLog(high)];
    expect(a.item()).toBeCloseTo(20, 4);
    expect(b.item()).toBeCloseTo(100, 3);
    await a.backward();
    await b.backward();
    expect(low.grad!.dataSync()[0]).toBeCloseTo(20, 4);
    expect(high.grad!.dataSync()[0]).toBe(0);
    clampLogitScale_(high);
    expect(high.item()).toBeCloseTo(Math.log(100), 5);
    for (const t of [low, high, a, b]) t.dispose();
  });
});

describe('input checks and memory', () => {
  it('rejects features of different shapes with a ContrastiveError naming the loss', async () => {
    const [x, y, s] = [tensor([1, 2, 3, 4], [2, 2]), tensor([1, 2, 3, 4, 5, 6], [3, 2]), tensor([0], [])];
    await expect(clipLoss(x, y, s)).rejects.toThrow(ContrastiveError);
    await expect(ntXentLoss(x, y)).rejects.toThrow(/ntXentLoss/);
    // int32 features: an untyped tfjs error from l2Normalize before any check (torch raises too)
    const [i, j, b] = [tensor([1, 2, 3, 4], [2, 2], { dtype: 'int32' }), tensor([1, 2, 3, 4], [2, 2]), tensor([0], [])];
    await expect(clipLoss(i, j, s)).rejects.toThrow(
      /clipLoss: image and text features must both be float32 \[batch, dim\], got \[2,2\] int32/,
    );
    await expect(ntXentLoss(j, i)).rejects.toThrow(/ntXentLoss: views must both be float32/);
    await expect(sigLipLoss(i, j, s, b)).rejects.toThrow(ContrastiveError);
    for (const t of [x, y, s, i, j, b]) t.dispose();
  });

  it('rejects a temperature that is not positive with a ContrastiveError', async () => {
    const [x, y] = [tensor([1, 2, 3, 4], [2, 2]), tensor([4, 3, 2, 1], [2, 2])];
    await expect(ntXentLoss(x, y, { tau: -1 })).rejects.toThrow(ContrastiveError);
    await expect(ntXentLoss(x, y, { tau: 0 })).rejects.toThrow(
      /ntXentLoss: temperature tau must be a positive finite number, got 0/,
    );
    for (const t of [x, y]) t.dispose();
  });

  it('refuses an option a loss does not know (a ported temperature= was ignored: tau stayed 0.5)', async () => {
    const [x, y, s, b] = [tensor([1, 2, 3, 4], [2, 2]), tensor([4, 3, 2, 1], [2, 2]), tensor([0], []), tensor([0], [])];
    // options a TypeScript literal would refuse, as a ported config passes them
    const bad = (o: object) => o as never;
    await expect(ntXentLoss(x, y, bad({ temperature: 0.1 }))).rejects.toThrow(
      /rank 0: ntXentLoss: unknown option "temperature" \(ddp does not have it\); its options are group, naiveGather/,
    );
    await expect(clipLoss(x, y, s, bad({ temperature: 0.07 }))).rejects.toThrow(ContrastiveError);
    await expect(clipLossFullMatrix(x, y, s, bad({ world_size: 2 }))).rejects.toThrow(/clipLossFullMatrix: unknown/);
    await expect(sigLipLoss(x, y, s, b, bad({ bias: 1 }))).rejects.toThrow(/sigLipLoss: unknown option "bias"/);
    // SigLIP has no all-gather to switch: naiveGather was accepted and ignored
    await expect(sigLipLoss(x, y, s, b, bad({ naiveGather: true }))).rejects.toThrow(/unknown option "naiveGather"/);
    // a config's string was truthy: the gather whose gradient stays local (wrong on more than one rank)
    await expect(clipLoss(x, y, s, bad({ naiveGather: 'false' }))).rejects.toThrow(
      /rank 0: clipLoss: naiveGather must be a boolean, got "false"/,
    );
    for (const t of [x, y, s, b]) t.dispose();
  });

  it('leaves no tensors behind across repeated losses and backwards', async () => {
    const c: Case = { name: 'clip', kind: 'clip', fixture: 'clip_loss_b8_d4', split: [8] };
    const counts: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await runCase(c);
      for (const t of Object.values(r.leaves)) t.dispose();
      counts.push(tf.memory().numTensors);
    }
    expect(counts[2]).toBe(counts[1]);
  });
});

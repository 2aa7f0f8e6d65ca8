import { mul, tensor } from '@ddp/autograd';
import { clipGradNorm, SGD } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { GradScaler, GradScalerError } from './index.js';
import { makeModel, scaledLoss, scalerFixture, scalerOptions } from './test/scaler-run.js';

const close = (ours: ArrayLike<number>, torch: number[]) =>
  torch.forEach((v, i) => {
    expect(ours[i]).toBeCloseTo(v, 5);
  });

describe("GradScaler against torch.cuda.amp.GradScaler's scale sequence through overflows", () => {
  it('factors that are not powers of two: the float32 scale times the double factor, rounded once', async () => {
    // torch's _amp_update_scale_ kernel multiplies float by double; the factor rounded to float32 first was
    // 1 ulp off (1769.47216796875 for 1769.4720458984375 after three backoffs by 0.3)
    const p = tensor([1], [1], { requiresGrad: true });
    const optimizer = new SGD([p], { lr: 0 });
    const scaler = new GradScaler({ initScale: 65536, backoffFactor: 0.3, growthFactor: 1.7, growthInterval: 1 });
    const seen: number[] = [];
    for (const x of [Infinity, Infinity, Infinity, 1, 1]) {
      optimizer.zeroGrad();
      const loss = scaler.scale(mul(p, x).sum());
      await loss.backward();
      loss.dispose();
      await scaler.step(optimizer);
      scaler.update();
      seen.push(scaler.getScale());
    }
    // numpy: s = float32(float64(s) * factor), step by step
    expect(seen).toEqual([19660.80078125, 5898.240234375, 1769.4720458984375, 3008.1025390625, 5113.7744140625]);
  });

  it('scale, growth tracker, skipped steps, unscaled gradients and weights match step by step', async () => {
    const { weight, bias, optimizer } = makeModel();
    const scaler = new GradScaler(scalerOptions());
    for (const [i, want] of scalerFixture.steps.entries()) {
      optimizer.zeroGrad();
      const loss = scaledLoss(scaler, weight, bias, i);
      await loss.backward();
      loss.dispose();
      await scaler.unscale_(optimizer);
      if (want.unscaledWeightGrad) close(weight.grad!.dataSync(), want.unscaledWeightGrad);
      const stepped = await scaler.step(optimizer);
      scaler.update();
      expect({
        step: i,
        skipped: !stepped,
        scale: scaler.getScale(),
        tracker: scaler.stateDict().growthTracker,
      }).toEqual({
        step: i,
        skipped: want.skipped,
        scale: want.scale,
        tracker: want.growthTracker,
      });
      close(weight.data.dataSync(), want.weight);
      close(bias.data.dataSync(), want.bias);
    }
    expect(scaler.stateDict()).toEqual(scalerFixture.stateDict);
  });

  it('keeps tf.memory().numTensors flat across steps', async () => {
    const { weight, bias, optimizer } = makeModel();
    const scaler = new GradScaler(scalerOptions());
    const counts: number[] = [];
    for (let i = 0; i < 8; i++) {
      optimizer.zeroGrad();
      const loss = scaledLoss(scaler, weight, bias, i);
      await loss.backward();
      loss.dispose();
      await scaler.step(optimizer);
      scaler.update();
      counts.push(tf.memory().numTensors);
    }
    expect(new Set(counts.slice(1)).size).toBe(1);
  });

  it('stateDict/loadStateDict resume the sequence where it was', async () => {
    const a = new GradScaler(scalerOptions());
    const b = new GradScaler();
    b.loadStateDict({ ...scalerFixture.stateDict });
    expect(b.stateDict()).toEqual(scalerFixture.stateDict);
    expect(a.getScale()).toBe(scalerFixture.options.init_scale);
    expect(() => b.loadStateDict({ ...scalerFixture.stateDict, backoffFactor: 2 })).toThrow(GradScalerError);
    expect(() => b.loadStateDict({ ...scalerFixture.stateDict, growthTracker: -1 })).toThrow(GradScalerError);
    expect(b.stateDict()).toEqual(scalerFixture.stateDict); // a rejected state changes nothing
  });

  // probe AI: a disabled scaler's state (its initScale, never kept) restarted an enabled one's scale, silently
  it("a disabled scaler's state is empty, as torch's; an enabled one refuses it, a disabled one ignores states", () => {
    const disabled = new GradScaler({ enabled: false, initScale: 1024 });
    expect(disabled.stateDict()).toEqual({});
    const enabled = new GradScaler();
    enabled.loadStateDict({ ...scalerFixture.stateDict });
    expect(() => enabled.loadStateDict(disabled.stateDict())).toThrow(/the state dict is empty, as a disabled/);
    expect(enabled.stateDict()).toEqual(scalerFixture.stateDict);
    disabled.loadStateDict({ ...scalerFixture.stateDict });
    expect(disabled.getScale()).toBe(1);
  });

  it('growth stops at float32 overflow; update(newScale) sets the scale', async () => {
    const { weight, bias, optimizer } = makeModel();
    const scaler = new GradScaler({ initScale: 2 ** 127, growthInterval: 1 });
    const loss = scaledLoss(new GradScaler({ enabled: false }), weight, bias, 0);
    await loss.backward();
    loss.dispose();
    await scaler.step(optimizer);
    scaler.update();
    expect(scaler.getScale()).toBe(2 ** 127);
    scaler.update(8);
    expect(scaler.getScale()).toBe(8);
  });

  it('raises GradScalerError for calls out of order and bad options', async () => {
    const { weight, bias, optimizer } = makeModel();
    const scaler = new GradScaler();
    expect(() => scaler.update()).toThrow(/no inf checks/);
    // torch: "No inf checks were recorded for this optimizer"; before, a step without gradients counted as clean
    await expect(scaler.step(optimizer)).rejects.toThrow(/no parameter has a gradient on any rank/);
    expect(scaler.getScale()).toBe(65536);
    for (const p of [weight, bias]) p.grad = tf.onesLike(p.data);
    await scaler.unscale_(optimizer);
    await expect(scaler.unscale_(optimizer)).rejects.toThrow(GradScalerError);
    await scaler.step(optimizer);
    await expect(scaler.step(optimizer)).rejects.toThrow(/already been called/);
    scaler.update();
    expect(() => new GradScaler({ growthFactor: 1 })).toThrow(GradScalerError);
    expect(() => new GradScaler({ backoffFactor: 1 })).toThrow(GradScalerError);
    expect(() => new GradScaler({ growthInterval: 0.5 })).toThrow(GradScalerError);
    expect(() => new GradScaler({ initScale: Number.POSITIVE_INFINITY })).toThrow(GradScalerError);
    // torch's spelling was ignored: the scale began at 2^16, not 1024
    expect(() => new GradScaler({ init_scale: 1024 } as object)).toThrow(
      /GradScaler: unknown option "init_scale"; did you mean initScale\?/,
    );
    // probe BR: freed parameters (FSDP's resharded ones) were skipped, and the error said backward had not run
    const fsdpLike = makeModel();
    for (const p of [fsdpLike.weight, fsdpLike.bias]) p.grad = tf.onesLike(p.data);
    fsdpLike.bias.free('fsdp: this parameter is resharded; step the shards');
    await expect(scaler.step(fsdpLike.optimizer)).rejects.toThrow(
      'unscale_(): parameter 1 of group 0 is freed: fsdp: this parameter is resharded; step the shards',
    );
    fsdpLike.weight.dispose();
    await expect(scaler.step(fsdpLike.optimizer)).rejects.toThrow(/parameter 0 of group 0 was disposed/);
    // a config's string was truthy: the scaler ran where meant off
    expect(() => new GradScaler({ enabled: 'false' as never })).toThrow(
      'GradScaler: enabled must be a boolean, got "false"',
    );
    // coerced in the arithmetic, but kept as a string in the scaler's state dict
    expect(() => new GradScaler({ growthFactor: '2' as never })).toThrow('GradScaler: growthFactor must be a number');
  });

  it('disabled: scale() is the loss itself and step() always steps', async () => {
    const { weight, bias, optimizer } = makeModel();
    const scaler = new GradScaler({ enabled: false });
    const loss = scaledLoss(scaler, weight, bias, 4); // the overflowing batch: unscaled, finite
    await loss.backward();
    loss.dispose();
    expect(await scaler.step(optimizer)).toBe(true);
    expect(scaler.getScale()).toBe(1);
  });

  it('a joined rank shadows as many agreements per iteration as the last step made, before and after a join', async () => {
    let calls = 0;
    const group = {
      size: 2,
      ranks: [0, 1],
      rank: 0,
      allReduce: () => {
        calls++;
        return { wait: async () => {} };
      },
    } as never;
    const scaler = new GradScaler({ processGroup: group });
    const hook = scaler.joinHook();
    for (let i = 0; i < 3; i++) await hook.mainHook();
    expect(calls).toBe(3); // one per shadowed iteration (no step yet: one optimizer assumed)
    await hook.postHook(false);
    const { weight, bias, optimizer } = makeModel();
    const other = new SGD([bias], { lr: 0.1 });
    const loss = scaledLoss(scaler, weight, bias, 0);
    await loss.backward();
    await scaler.step(optimizer);
    await scaler.step(other);
    scaler.update();
    calls = 0;
    await scaler.joinHook().mainHook();
    expect(calls).toBe(2); // two optimizers stepped: two agreements (was 5: the shadows counted too)
    for (const t of [loss, weight, bias]) t.dispose();
  });
});

// probe X: not awaited, unscale_ had divided the gradients but not yet recorded it, and step() divided them again
// (1024× too small, silently); update() after a step not awaited dropped its inf check (an overflow kept the scale)
describe('unscale_() and step() not awaited', () => {
  /** p = [1, 2] holding the scaled gradient of 3·Σp, with its SGD optimizer and the scaler. */
  async function scaledGradient(lr: number, initScale: number) {
    const p = tensor([1, 2], [2], { requiresGrad: true });
    const [optimizer, scaler] = [new SGD([p], { lr }), new GradScaler({ initScale })];
    const loss = scaler.scale(mul(p, 3).sum());
    await loss.backward();
    loss.dispose();
    return { p, optimizer, scaler };
  }

  it('step() takes the running unscale_ instead of dividing again; update() waits for neither, it refuses', async () => {
    const { p, optimizer, scaler } = await scaledGradient(0, 1024);
    void scaler.unscale_(optimizer);
    await expect(scaler.unscale_(optimizer)).rejects.toThrow(/unscale_\(\) is still running: await it/);
    await scaler.step(optimizer);
    expect(Array.from(p.grad!.dataSync())).toEqual([3, 3]); // once divided by 1024, as torch
    scaler.update();
    optimizer.zeroGrad();
    const again = scaler.scale(mul(p, Infinity).sum());
    await again.backward();
    again.dispose();
    const stepping = scaler.step(optimizer);
    expect(() => scaler.update()).toThrow(/update\(\): a step\(\) or unscale_\(\) is still running/);
    expect(await stepping).toBe(false);
    scaler.update();
    expect(scaler.getScale()).toBe(512); // the overflow backed off
    p.dispose();
  });

  // probe AB: torch's order `scaler.step(opt); opt.zero_grad()` without await: zeroGrad cleared the gradients
  // before the step (which awaits the overflow agreement) took them, and step() still resolved true
  it('zeroGrad() or clipping while step() or unscale_() still runs: refused, naming it', async () => {
    const { p, optimizer, scaler } = await scaledGradient(0.5, 4);
    const unscaling = scaler.unscale_(optimizer);
    expect(() => clipGradNorm([p], 1)).toThrow(/still being written by a running scaler\.unscale_\(\)/);
    await unscaling;
    const stepping = scaler.step(optimizer);
    expect(() => optimizer.zeroGrad()).toThrow(/still being written by a running scaler\.step\(\) \(not awaited\)/);
    expect(await stepping).toBe(true);
    expect(Array.from(p.data.dataSync())).toEqual([-0.5, 0.5]); // stepped by −lr·3
    p.dispose();
  });
});

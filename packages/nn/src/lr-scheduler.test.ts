import { tf } from '@ddp/tensor';
import { describe, expect, it, vi } from 'vitest';
import { SchedulerError, StepLR, WarmupCosineLR, warmupCosineLr } from './lr-scheduler.js';
import { SGD } from './optim/sgd.js';
import { Parameter } from './parameter.js';

describe('learning-rate schedules', () => {
  it('StepLR decays every stepSize steps', () => {
    const opt = { paramGroups: [{ lr: 1 }, { lr: 0.5 }] };
    const s = new StepLR(opt, 2, 0.1);
    const seen: number[][] = [];
    for (let i = 0; i < 5; i++) {
      seen.push(s.getLastLr());
      s.step();
    }
    expect(seen.map((lrs) => lrs.map((x) => +x.toPrecision(6)))).toEqual([
      [1, 0.5],
      [1, 0.5],
      [0.1, 0.05],
      [0.1, 0.05],
      [0.01, 0.005],
    ]);
    expect(() => new StepLR(opt, 0)).toThrow(SchedulerError);
  });

  it('warms up linearly then follows a cosine to minLr', () => {
    const o = { warmupSteps: 4, totalSteps: 14, minLr: 0.1 };
    expect(warmupCosineLr(0, 1, o)).toBe(0);
    expect(warmupCosineLr(2, 1, o)).toBe(0.5);
    expect(warmupCosineLr(4, 1, o)).toBe(1);
    expect(warmupCosineLr(9, 1, o)).toBeCloseTo(0.55, 12);
    expect(warmupCosineLr(14, 1, o)).toBe(0.1);
    expect(warmupCosineLr(100, 1, o)).toBe(0.1);
  });

  it('restores from its state dict', () => {
    const opt = { paramGroups: [{ lr: 2 }] };
    const s = new WarmupCosineLR(opt, { warmupSteps: 2, totalSteps: 10 });
    for (let i = 0; i < 5; i++) s.step();
    const opt2 = { paramGroups: [{ lr: 2 }] };
    const s2 = new WarmupCosineLR(opt2, { warmupSteps: 2, totalSteps: 10 });
    s2.loadStateDict(JSON.parse(JSON.stringify(s.stateDict())));
    expect(opt2.paramGroups[0]?.lr).toBe(opt.paramGroups[0]?.lr);
    expect(opt.paramGroups[0]?.lr).toBeCloseTo(warmupCosineLr(5, 2, { warmupSteps: 2, totalSteps: 10 }), 12);
  });

  it("restores its settings too, as torch's: a run resumed with another total or floor keeps the saved schedule", () => {
    const opt = { paramGroups: [{ lr: 2 }] };
    const saved = new WarmupCosineLR(opt, { warmupSteps: 2, totalSteps: 60, minLr: 0.1 });
    for (let i = 0; i < 20; i++) saved.step();
    const opt2 = { paramGroups: [{ lr: 1 }] };
    const options = { warmupSteps: 10, totalSteps: 100, minLr: 0.05 };
    const resumed = new WarmupCosineLR(opt2, options);
    resumed.loadStateDict(JSON.parse(JSON.stringify(saved.stateDict())));
    for (let i = 0; i < 40; i++) {
      saved.step();
      resumed.step();
      expect(opt2.paramGroups[0]?.lr).toBe(opt.paramGroups[0]?.lr); // was: old peak, new total and floor
    }
    expect(options).toEqual({ warmupSteps: 10, totalSteps: 100, minLr: 0.05 }); // the caller's object untouched
    // the default floor is saved too: a resume built with minLr 0.5 went on towards 0.5, not 0; and the
    // other way round, a saved floor loaded into a scheduler built without one was refused
    for (const [savedFloor, resumedFloor] of [
      [undefined, 0.5],
      [0.1, undefined],
    ]) {
      const a = { paramGroups: [{ lr: 1 }] };
      const s1 = new WarmupCosineLR(a, {
        warmupSteps: 2,
        totalSteps: 10,
        ...(savedFloor ? { minLr: savedFloor } : {}),
      });
      for (let i = 0; i < 4; i++) s1.step();
      const b = { paramGroups: [{ lr: 1 }] };
      const s2 = new WarmupCosineLR(b, {
        warmupSteps: 2,
        totalSteps: 10,
        ...(resumedFloor ? { minLr: resumedFloor } : {}),
      });
      s2.loadStateDict(JSON.parse(JSON.stringify(s1.stateDict())));
      for (let i = 0; i < 8; i++) {
        s1.step();
        s2.step();
        expect(b.paramGroups[0]?.lr).toBe(a.paramGroups[0]?.lr);
      }
    }
    // a state saved before the floor always was (no minLr: it was the default, 0)
    const old = { lastEpoch: 9, baseLrs: [1], options: { warmupSteps: 2, totalSteps: 10 }, kind: 'WarmupCosineLR' };
    const c = { paramGroups: [{ lr: 1 }] };
    new WarmupCosineLR(c, { warmupSteps: 2, totalSteps: 10, minLr: 0.5 }).loadStateDict(old);
    expect(c.paramGroups[0]?.lr).toBeCloseTo(warmupCosineLr(9, 1, { warmupSteps: 2, totalSteps: 10 }), 12);
    const step = new StepLR({ paramGroups: [{ lr: 1 }] }, 5, 0.5);
    const stepResumed = new StepLR({ paramGroups: [{ lr: 1 }] }, 2, 0.1);
    stepResumed.loadStateDict(step.stateDict());
    expect([stepResumed.stepSize, stepResumed.gamma]).toEqual([5, 0.5]);
  });

  // Two schedulers stepping one optimizer: each wrote its own closed-form lr over the other's,
  // so only the last constructed or stepped schedule applied, silently (torch multiplies
  // chained schedulers). An lr set by hand between steps was overwritten the same way.
  // probe AL: stepped per micro-batch under accumulation, a 4-step warmup was over after the first optimizer step
  it("says once when it steps before the optimizer's first step (torch's warning), not once the optimizer stepped", () => {
    const warned = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const told = () =>
      warned.mock.calls.filter(([, o]) => (o as { code?: string })?.code === 'DDP_SCHEDULER_BEFORE_OPTIMIZER');
    const p = new Parameter(tf.ones([2]));
    try {
      const early = new WarmupCosineLR(new SGD([p], { lr: 1 }), { warmupSteps: 4, totalSteps: 10 });
      early.step();
      early.step();
      expect(told().map(([m]) => m)).toEqual([
        expect.stringMatching(/^WarmupCosineLR\.step\(\) before the optimizer's first step\(\)/),
      ]);
      const opt = new SGD([p], { lr: 1 });
      const inOrder = new StepLR(opt, 2);
      p.grad = tf.ones([2]);
      opt.step();
      inOrder.step();
      expect(told()).toHaveLength(1);
    } finally {
      warned.mockRestore();
      p.dispose();
    }
  });

  it('refuses to step when another scheduler or the user changed the lr it set', () => {
    const opt = { paramGroups: [{ lr: 1 }] };
    const warm = new WarmupCosineLR(opt, { warmupSteps: 2, totalSteps: 10 });
    const decay = new StepLR(opt, 3, 0.5); // made over warm's lr 0 and initialLr 1: it writes nothing
    expect(() => decay.step()).toThrow(/StepLR\.step: param group 0 had lr 0 when this scheduler was made/);
    warm.step();
    for (const group of opt.paramGroups) group.lr = 0.3;
    expect(() => warm.step()).toThrow(
      /WarmupCosineLR\.step: param group 0's lr is 0\.3, not the 0\.5 this scheduler set/,
    );
  });

  // probe AE: a new schedule wrote the earlier initial lr over the lr the group had (an lr set by hand to
  // fine-tune, or where an old schedule had decayed it), 10x too high, where torch's chains from that lr
  it('a new scheduler over groups whose lr is not their initialLr: refused at its step until told where to start', () => {
    const opt = { paramGroups: [{ lr: 1 }] as { lr: number; initialLr?: number }[] };
    new StepLR(opt, 1, 0.5).step();
    expect(() => new StepLR(opt, 1, 0.1).step()).toThrow(
      /had lr 0\.5 when this scheduler was made, and initialLr 1 from an earlier schedule or a loaded optimizer state/,
    );
    expect(opt.paramGroups[0]?.lr).toBe(0.5); // not overwritten with 1
    for (const group of opt.paramGroups) group.initialLr = group.lr;
    const next = new StepLR(opt, 1, 0.1);
    next.step();
    expect(opt.paramGroups[0]?.lr).toBeCloseTo(0.05, 12);
  });

  it("made over a loaded optimizer state, then given the schedule's state: resumes it", () => {
    const opt = { paramGroups: [{ lr: 0.025, initialLr: 0.1 }] };
    const sched = new StepLR(opt, 3, 0.5);
    sched.loadStateDict({ lastEpoch: 6, baseLrs: [0.1], options: { stepSize: 3, gamma: 0.5 }, kind: 'StepLR' });
    sched.step();
    expect(opt.paramGroups[0]?.lr).toBeCloseTo(0.025, 12);
    sched.step();
    sched.step();
    expect(opt.paramGroups[0]?.lr).toBeCloseTo(0.0125, 12);
  });

  it("a group's cosine floor is the same fraction of its own initial lr: a frozen group (lr 0) stays frozen", () => {
    // before: one absolute floor for every group lifted the lr-0 group to minLr as the cosine decayed
    const opt = { paramGroups: [{ lr: 0.1 }, { lr: 0.02 }, { lr: 0 }] };
    const s = new WarmupCosineLR(opt, { warmupSteps: 3, totalSteps: 10, minLr: 0.01 });
    for (let t = 0; t < 12; t++) {
      const [a, b, frozen] = s.getLastLr();
      expect(frozen).toBe(0);
      if (a > 0) expect(b / a).toBeCloseTo(0.2, 12);
      s.step();
    }
    expect(s.getLastLr()).toEqual([0.01, 0.002, 0]);
  });

  it('refuses what it would otherwise misread: misspelt options, a gamma that is not a number, a group added later', () => {
    const opt = { paramGroups: [{ lr: 0.1 }] };
    // before: min_lr and warmup_steps were dropped (no floor, no warm-up); { gamma } made every lr NaN
    expect(() => new WarmupCosineLR(opt, { warmupSteps: 0, totalSteps: 2, min_lr: 0.05 } as never)).toThrow(
      /WarmupCosineLR: unknown option "min_lr"; did you mean minLr\?/,
    );
    expect(() => new StepLR(opt, 1, { gamma: 0.5 } as never)).toThrow(/StepLR: gamma must be a finite number/);
    // before: a group added after the scheduler had no initial lr here, and its lr became NaN
    const s = new StepLR(opt, 2, 0.5);
    (opt.paramGroups as { lr: number }[]).push({ lr: 0.01 });
    expect(() => s.step()).toThrow(/the optimizer has 2 param groups, the scheduler was made for 1/);
    expect(opt.paramGroups.map((g) => g.lr)).toEqual([0.1, 0.01]);
  });
});

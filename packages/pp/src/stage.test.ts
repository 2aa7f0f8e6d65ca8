import {
  claimGradientReduction,
  crossEntropy,
  type Indices,
  markParameterShard,
  noGrad,
  releaseGradientReduction,
  type Tensor,
  tidy,
} from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup, type ProcessGroup } from '@ddp/comm';
import { BatchNorm1d, Module, type Parameter } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { PipelineStage, PipelineStageError, pipelineStep, type Schedule } from './index.js';
import { buildParts, CFG, makeOptimizer, microBatches, namedValues, referenceRun, rows } from './test/model.js';

/** An LM head that reuses the embedding's weight (GPT-2's tied wte / lm_head). */
class TiedHead extends Module {
  constructor(readonly weight: Parameter) {
    super();
    this.registerParameter('weight', weight);
  }
  forward(x: Tensor): Tensor {
    return x.matmul(this.weight.transpose());
  }
}

/** A BatchNorm over each position's features: [b, seq, dim] rows normalised as [b·seq, dim]. */
class RowNorm extends Module {
  readonly norm = new BatchNorm1d(CFG.dim);
  constructor() {
    super();
    this.registerModule('norm', this.norm);
  }
  forward(x: Tensor): Tensor {
    return this.norm.forward(x.reshape([-1, CFG.dim])).reshape(x.shape);
  }
}

describe('PipelineStage', () => {
  it('keeps the embedding on the first stage, the head on the last, and names parameters as the whole model does', () => {
    const whole = new PipelineStage(buildParts(), 0, 1);
    const names = whole.namedParameters().map(([n]) => n);
    const first = new PipelineStage(buildParts(), 0, 2);
    const last = new PipelineStage(buildParts(), 1, 2);
    const firstNames = first.namedParameters().map(([n]) => n);
    const lastNames = last.namedParameters().map(([n]) => n);
    expect(firstNames[0]).toBe('embedding.weight');
    expect(firstNames.some((n) => n.startsWith('head.') || n.startsWith('layers.2.'))).toBe(false);
    expect(lastNames.some((n) => n.startsWith('embedding.') || n.startsWith('layers.1.'))).toBe(false);
    expect(lastNames.filter((n) => n.startsWith('head.')).length).toBe(4);
    expect([...firstNames, ...lastNames]).toEqual(names);
    const values = namedValues(whole);
    for (const [name, v] of Object.entries({ ...namedValues(first), ...namedValues(last) }))
      expect(v).toEqual(values[name]);
    for (const m of [whole, first, last]) m.dispose();
  });

  it('disposes the parts it does not keep', () => {
    const before = tf.memory().numTensors;
    const stage = new PipelineStage(buildParts(), 1, 2);
    expect(tf.memory().numTensors - before).toBe(stage.parameters().length + stage.buffers().length);
    stage.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('refuses a hidden state that is not a Tensor after the first stage, and a loss before the last', () => {
    const [first, last] = [new PipelineStage(buildParts(), 0, 2), new PipelineStage(buildParts(), 1, 2)];
    expect(() => last.forward([[1, 2]])).toThrow(PipelineStageError);
    expect(() => first.loss(first.forward([[1]]), [1])).toThrow(/stage 0 of 2 is not the last stage/);
    first.dispose();
    last.dispose();
  });

  // before: stage 1 disposed the embedding, and with it the weight its head still held (a crash at its next use)
  it('refuses a parameter tied across stages (an embedding tied to the LM head), naming both', () => {
    const parts = buildParts();
    const tied = parts.embedding.parameters()[0];
    parts.head.dispose();
    parts.head = new TiedHead(tied);
    expect(() => new PipelineStage(parts, 1, 2)).toThrow(
      /^stage 1: embedding.weight \(stage 0\) and head.weight \(stage 1\) are one parameter/,
    );
    expect(new PipelineStage(parts, 0, 1).parameters()).toContain(tied); // one stage holds both
    for (const m of [parts.embedding, ...parts.layers, parts.head]) m.dispose();
  });

  it('refuses parts holding tensor-parallel shards (was: an untyped TypeError in the first step)', () => {
    const parts = buildParts();
    markParameterShard(parts.layers[1].parameters()[0], { ranks: [0, 1], rank: 0 });
    expect(() => new PipelineStage(parts, 0, 2)).toThrow(
      /stage 0: TransformerBlock holds tensor-parallel shards: pipeline stages run synchronous layers/,
    );
    for (const m of [parts.embedding, ...parts.layers, parts.head]) m.dispose();
  });
});

/** Stands in for rank 0 of a 2-rank pp group in a test that only agrees on the micro-batches (as the other stage). */
const fakePipelineGroup = {
  rank: 0,
  size: 2,
  allGather: (input: Int32Array) => ({ wait: async () => [input, input] }),
  allReduce: () => ({ wait: async () => {} }),
} as unknown as ProcessGroup;

describe('pipelineStep on a one-stage pipeline (gradient accumulation over micro-batches)', () => {
  let group: ProcessGroup;
  beforeAll(async () => {
    group = await initProcessGroup({ rank: 0, worldSize: 1 });
  });
  afterAll(() => destroyProcessGroup());

  it('refuses an option it does not know (ignored, a misspelt schedule ran 1f1b)', async () => {
    const stage = new PipelineStage(buildParts(), 0, 1);
    const opts = { ppGroup: group, activationShape: [1], schedul: 'afab' } as object;
    await expect(pipelineStep(stage, microBatches(0, 0), opts as never)).rejects.toThrow(PipelineStageError);
    await expect(pipelineStep(stage, microBatches(0, 0), opts as never)).rejects.toThrow(/unknown option "schedul"/);
    const check = { ppGroup: group, activationShape: [1], check: 'false' } as object; // truthy: checked anyway
    await expect(pipelineStep(stage, microBatches(0, 0), check as never)).rejects.toThrow(/check must be a boolean/);
    // was: the last stage's backward failed alone (AutogradArgumentError), the others waited out the timeout
    const underNoGrad = noGrad(() => pipelineStep(stage, microBatches(0, 0), { ppGroup: group, activationShape: [1] }));
    await expect(underNoGrad).rejects.toThrow(/stage 0: pipelineStep trains .* cannot run under noGrad/);
    stage.dispose();
  });

  // probe AK: silent before; the numbers are torch's Pipe's (each micro-batch its own statistics)
  it('says once when a stage runs a BatchNorm in training mode over several micro-batches; not over one, nor in eval', async () => {
    const stageWith = (training: boolean) => {
      const parts = buildParts();
      parts.layers[0].dispose();
      parts.layers[0] = new RowNorm();
      if (!training) parts.layers[0].eval();
      return new PipelineStage(parts, 0, 1);
    };
    const warned = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const told = () =>
      warned.mock.calls.filter(([, o]) => (o as { code?: string })?.code === 'DDP_PIPELINE_BATCH_NORM');
    const opts = { ppGroup: group, activationShape: [CFG.microBatch, CFG.seq, CFG.dim] };
    const [training, inEval] = [stageWith(true), stageWith(false)];
    try {
      await pipelineStep(training, microBatches(0, 0).slice(0, 1), opts);
      await pipelineStep(inEval, microBatches(0, 0), opts);
      expect(told()).toEqual([]);
      await pipelineStep(training, microBatches(0, 0), opts);
      await pipelineStep(training, microBatches(1, 0), opts);
      expect(told().map(([message]) => message)).toEqual([
        expect.stringMatching(
          /^pipelineStep: stage 0 holds BatchNorm in training mode \(layers\.0\.norm\): each of the 4 /,
        ),
      ]);
    } finally {
      warned.mockRestore();
      training.dispose();
      inEval.dispose();
    }
  });

  // probe X: not awaited (torch's step is synchronous), the next step's schedule met this one's until the
  // timeout, and opt.step() in between stepped gradients not yet there
  it('a step not awaited: the next step, opt.step and eval() are refused until it is', async () => {
    const stage = new PipelineStage(buildParts(), 0, 1);
    const opt = makeOptimizer(stage);
    const opts = { ppGroup: group, activationShape: [CFG.microBatch, CFG.seq, CFG.dim] };
    const running = pipelineStep(stage, microBatches(0, 0), opts);
    await expect(pipelineStep(stage, microBatches(1, 0), opts)).rejects.toThrow(/while the last one still runs/);
    expect(() => opt.step()).toThrow(/still being written by a running pipelineStep\(\) \(not awaited\)/);
    expect(() => stage.eval()).toThrow(/PipelineStage\.eval\(\) while pipelineStep's forward still runs/);
    await running;
    opt.step();
    await pipelineStep(stage, microBatches(1, 0), opts);
    opt.dispose();
    stage.dispose();
  });

  // probe Z: ZeRO stage 2 frees the gradients of parameters other ranks own, so dpGroup's average met zeros
  it('a dpGroup over parameters another wrapper reduces (ZeRO stage 2, DDP): refused, naming it', async () => {
    const stage = new PipelineStage(buildParts(), 0, 1);
    const zero = {}; // what ZeroRedundancyOptimizer({ stage: 2 }) claims at construction
    const params = stage.namedParameters().map(([name, param]) => ({ name, param }));
    claimGradientReduction(zero, params, 'ZeroRedundancyOptimizer stage 2', (m) => new Error(m));
    const dpGroup = { rank: 0, size: 2, ranks: [0, 1], allReduce() {} } as unknown as ProcessGroup; // refused first
    const opts = { ppGroup: group, activationShape: [CFG.microBatch, CFG.seq, CFG.dim], dpGroup };
    await expect(pipelineStep(stage, microBatches(0, 0), opts)).rejects.toThrow(
      /pipelineStep \(dpGroup\): .* already belong to another live wrapper \(ZeroRedundancyOptimizer stage 2\)/,
    );
    releaseGradientReduction(zero, params);
    stage.dispose();
  });

  // probe AD: newGroup(…) not awaited, given as dpGroup: its size undefined, no replica was averaged (silently)
  it('a dpGroup or ppGroup that is a Promise is refused', async () => {
    const stage = new PipelineStage(buildParts(), 0, 1);
    const opts = { ppGroup: group, activationShape: [CFG.microBatch, CFG.seq, CFG.dim] };
    const pending = Promise.resolve(group) as never;
    await expect(pipelineStep(stage, microBatches(0, 0), { ...opts, dpGroup: pending })).rejects.toThrow(
      /pipelineStep \(dpGroup\): processGroup is a Promise/,
    );
    await expect(pipelineStep(stage, microBatches(0, 0), { ...opts, ppGroup: pending })).rejects.toThrow(/ppGroup/);
    stage.dispose();
  });

  for (const schedule of ['afab', '1f1b'] as const) {
    it(`${schedule}: ${CFG.steps} steps on ${CFG.numMicroBatches} micro-batches match the whole batch, with flat tensor counts`, async () => {
      const reference = await referenceRun(1);
      const stage = new PipelineStage(buildParts(), 0, 1);
      const opt = makeOptimizer(stage);
      const counts: number[] = [];
      for (let step = 0; step < CFG.steps; step++) {
        const res = await pipelineStep(stage, microBatches(step, 0), {
          ppGroup: group,
          activationShape: [CFG.microBatch, CFG.seq, CFG.dim],
          schedule,
        });
        opt.step();
        opt.zeroGrad();
        expect(Math.abs(res.loss! - reference.losses[step])).toBeLessThan(1e-5);
        expect(res.peakLiveActivations).toBe(schedule === 'afab' ? CFG.numMicroBatches : 1);
        counts.push(tf.memory().numTensors);
      }
      for (const [name, v] of Object.entries(namedValues(stage))) {
        const want = reference.params[name];
        expect(Math.max(...v.map((x, i) => Math.abs(x - want[i]))), name).toBeLessThan(1e-5);
      }
      expect(new Set(counts.slice(1)).size).toBe(1);
      opt.dispose();
      stage.dispose();
    });
  }

  it('micro-batches of unequal rows (5 as 2, 2, 1): the whole batch mean loss and its gradients', async () => {
    // before: each micro-batch's mean weighted 1/m, the mean of the means: loss 2.37 for 2.39, gradients 8e-2 off
    const whole = new PipelineStage(buildParts(), 0, 1);
    const { input, target } = rows(0, 0, 5);
    const loss = tidy(() => whole.loss(whole.forward(input), target));
    await loss.backward();
    const stage = new PipelineStage(buildParts(), 0, 1);
    const parts = [rows(0, 0, 2), rows(0, 2, 2), rows(0, 4, 1)];
    const res = await pipelineStep(stage, parts, { ppGroup: group, activationShape: [2, CFG.seq, CFG.dim] });
    expect(res.loss).toBeCloseTo(loss.item(), 5);
    const want = whole.parameters().map((p) => [...p.grad!.dataSync()]);
    for (const [i, p] of stage.parameters().entries()) {
      const got = [...p.grad!.dataSync()];
      expect(Math.max(...got.map((g, j) => Math.abs(g - want[i][j])))).toBeLessThan(1e-5);
    }
    loss.dispose();
    whole.dispose();
    stage.dispose();
  });

  // before: no check of explicit schedules, and the unbackwarded micro-batch's stash disposed: its gradient dropped
  it('refuses an explicit schedule that skips a backward: checked, and at the end of the step unchecked', async () => {
    const stage = new PipelineStage(buildParts(), 0, 1);
    const skips: Schedule = [0, 1, 2, 3].map((mb) => ({ op: 'forward', microBatch: mb }));
    for (const mb of [0, 1, 2]) skips.push({ op: 'backward', microBatch: mb });
    const opts = { ppGroup: group, activationShape: [CFG.microBatch, CFG.seq, CFG.dim], schedule: skips };
    const before = tf.memory().numTensors;
    await expect(pipelineStep(stage, microBatches(0, 0), opts)).rejects.toThrow(
      /schedule incomplete: stage 0 never backwards micro-batch 3/,
    );
    await expect(pipelineStep(stage, microBatches(0, 0), { ...opts, check: false })).rejects.toThrow(
      /^stage 0: the schedule never backwards micro-batch 3: its gradient would be dropped/,
    );
    stage.zeroGrad();
    expect(tf.memory().numTensors).toBe(before);
    stage.dispose();
  });

  it("refuses micro-batch weights that cannot be right: nothing to average over, a count for a 'sum'", async () => {
    const stage = new PipelineStage(buildParts(), 0, 1);
    const opts = { ppGroup: group, activationShape: [CFG.microBatch, CFG.seq, CFG.dim] };
    const padding = [0, 1, 2].map((i) => rows(0, 2 * i, 2));
    padding[2].target.fill(-100);
    await expect(pipelineStep(stage, padding, opts)).rejects.toThrow(/^stage 0: micro-batch 2 counts 0 targets/);
    const counted = microBatches(0, 0).map((b) => ({ ...b, count: 12 }));
    await expect(pipelineStep(stage, counted, { ...opts, lossReduction: 'sum' })).rejects.toThrow(
      /micro-batch 0 has a count, which weights a 'mean' loss/,
    );
    stage.dispose();
  });

  // before: weighted by the targets' non-negative entries, silently (probe AT: loss 1.598 for the batch's 1.705)
  it("refuses weights the loss contradicts: ignoreIndex 0, float32 class indices padded with -1; int32's -1 is right", async () => {
    const opts = { ppGroup: group, activationShape: [2, CFG.seq, CFG.dim] };
    const stageIgnoring = (ignoreIndex: number) => {
      const lossFn = (out: Tensor, t: Indices) => crossEntropy(out.reshape([-1, CFG.vocab]), t, { ignoreIndex });
      return new PipelineStage({ ...buildParts(), lossFn }, 0, 1);
    };
    // the first micro-batch all padding but its first token, the second none (no target 0 left)
    const padded = (pad: number) => {
      const batch = [rows(0, 0, 2), rows(0, 2, 2)].map((b) => ({ ...b, target: b.target.map((v) => v || 1) }));
      batch[0].target = batch[0].target.map((v, i) => (i === 0 ? v : pad));
      return batch;
    };
    for (const [ignoreIndex, float] of [
      [0, false],
      [-1, true],
    ] as const) {
      const stage = stageIgnoring(ignoreIndex);
      const batch = padded(ignoreIndex).map((b) => ({ ...b, target: float ? tf.tensor(b.target) : b.target }));
      await expect(pipelineStep(stage, batch, opts)).rejects.toThrow(
        /^stage 0: micro-batch 0's loss averaged over 1 of the batch's \d+ entries/,
      );
      stage.dispose();
    }
    const [stage, whole] = [stageIgnoring(-1), stageIgnoring(-1)];
    const [a, b] = padded(-1);
    const res = await pipelineStep(stage, [a, b], opts);
    const loss = tidy(() => whole.loss(whole.forward([...a.input, ...b.input]), [...a.target, ...b.target]));
    expect(res.loss).toBeCloseTo(loss.item(), 5);
    loss.dispose();
    for (const s of [stage, whole]) s.dispose();
  });

  it('refuses a stage that does not match its pp-group rank, a micro-batch without a target, an output of another shape', async () => {
    const stage = new PipelineStage(buildParts(), 1, 2);
    await expect(pipelineStep(stage, microBatches(0, 0), { ppGroup: group, activationShape: [1] })).rejects.toThrow(
      /stage 1 of 2 runs on pp-group rank 0 of 1/,
    );
    stage.dispose();
    const one = new PipelineStage(buildParts(), 0, 1);
    const before = tf.memory().numTensors;
    const noTarget = microBatches(0, 0).map(({ input }) => ({ input }));
    const explicit: Schedule = [{ op: 'forward', microBatch: 0 }];
    await expect(
      pipelineStep(one, noTarget, { ppGroup: group, activationShape: [1], schedule: explicit, check: false }),
    ).rejects.toThrow(/micro-batch 0 has no target/);
    expect(tf.memory().numTensors).toBe(before);
    one.dispose();
    const two = new PipelineStage(buildParts(), 0, 2);
    const onlyForward: Schedule = [{ op: 'forward', microBatch: 0 }];
    const wrongShape = {
      ppGroup: fakePipelineGroup,
      activationShape: [CFG.microBatch, CFG.seq, CFG.dim + 1],
      schedule: onlyForward,
      check: false,
    };
    const before2 = tf.memory().numTensors;
    await expect(pipelineStep(two, microBatches(0, 0), wrongShape)).rejects.toThrow(
      /output has shape \[2, 6, 8\], not the activationShape \[2, 6, 9\]/,
    );
    expect(tf.memory().numTensors).toBe(before2);
    // as many elements, another layout (seq-first): the next stage would read it scrambled
    const seqFirst = { ...wrongShape, activationShape: [CFG.seq, CFG.microBatch, CFG.dim] };
    await expect(pipelineStep(two, microBatches(0, 0), seqFirst)).rejects.toThrow(
      /output has shape \[2, 6, 8\], not the activationShape \[6, 2, 8\]/,
    );
    expect(tf.memory().numTensors).toBe(before2);
    two.dispose();
  });
});

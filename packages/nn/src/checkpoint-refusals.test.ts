import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { markGradientShard, markParameterShard } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { latestCheckpoint, loadCheckpoint, saveCheckpoint } from './checkpoint.js';
import { CheckpointError } from './checkpoint-errors.js';
import { Generator } from './generator.js';
import { Sequential } from './layers/container.js';
import { Linear } from './layers/linear.js';
import { SchedulerError, StepLR, WarmupCosineLR } from './lr-scheduler.js';
import { StateDictError } from './module.js';
import { Adam } from './optim/adam.js';
import { OptimizerError } from './optim/optimizer.js';
import { SGD } from './optim/sgd.js';
import { Parameter } from './parameter.js';
import { Toy, trainSteps } from './test/checkpoint-toy.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ddp-nn-refuse-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const values = (model: Toy) => model.parameters().flatMap((p) => Array.from(p.data.dataSync()));

describe('what a checkpoint cannot keep is refused at save, and what does not fit at load', () => {
  it('extra values JSON would change: refused before anything is written (were: Infinity → null, Map → {})', async () => {
    const model = new Toy(new Generator(1));
    for (const extra of [
      { bestLoss: Number.POSITIVE_INFINITY },
      { lastLoss: Number.NaN },
      { seen: new Set([1, 2]) },
      { pos: new Map([['shard', 3]]) },
      { when: new Date(0) },
      { losses: [1, undefined, 3] },
      { weights: Float32Array.of(1.5) },
    ]) {
      await expect(saveCheckpoint(dir, { model, extra }), JSON.stringify([...Object.keys(extra)])).rejects.toThrow(
        CheckpointError,
      );
    }
    await expect(saveCheckpoint(dir, { model, epoch: Number.NaN })).rejects.toThrow(/epoch is NaN/);
    expect(await latestCheckpoint(dir)).toBeNull();
    await saveCheckpoint(dir, { model, extra: { best: 1.5, tags: ['a'], nested: { ok: true, skip: undefined } } });
    expect((await loadCheckpoint(dir, { model })).extra).toEqual({ best: 1.5, tags: ['a'], nested: { ok: true } });
  });

  it('a step the directory cannot name is refused; the previous checkpoint stays the latest (was: skipped)', async () => {
    const model = new Toy(new Generator(1));
    await saveCheckpoint(dir, { model, step: 100 });
    for (const step of [100.5, -1, Number.NaN, Number.POSITIVE_INFINITY, 1e21]) {
      await expect(saveCheckpoint(dir, { model, step })).rejects.toThrow(/step must be a non-negative integer/);
    }
    expect((await loadCheckpoint(dir, { model })).step).toBe(100);
  });

  it("another optimizer's or scheduler's state is refused, and a refused load changes nothing (was: loaded)", async () => {
    const gen = new Generator(2);
    const saved = new Toy(gen);
    const adam = new Adam(saved.parameters(), { lr: 0.01 });
    trainSteps(saved, adam, gen, 2);
    await saveCheckpoint(dir, {
      model: saved,
      optimizer: adam,
      scheduler: new WarmupCosineLR(adam, { warmupSteps: 2, totalSteps: 10 }),
    });
    const fresh = new Toy(new Generator(3));
    const before = values(fresh);
    const sgd = new SGD(fresh.parameters(), { lr: 0.1, momentum: 0.9 });
    await expect(loadCheckpoint(dir, { model: fresh, optimizer: sgd })).rejects.toThrow(
      new OptimizerError('state dict of Adam, loaded into SGD'),
    );
    // one group of one parameter where the checkpoint has two: refused before the model changes
    const fewer = new Adam([fresh.weight], { lr: 0.01 });
    await expect(loadCheckpoint(dir, { model: fresh, optimizer: fewer })).rejects.toThrow(OptimizerError);
    const other = new Adam(fresh.parameters(), { lr: 0.01 });
    await expect(
      loadCheckpoint(dir, { model: fresh, optimizer: other, scheduler: new StepLR(other, 2, 0.5) }),
    ).rejects.toThrow(new SchedulerError('state of a WarmupCosineLR, loaded into a StepLR'));
    expect(values(fresh)).toEqual(before);
  });

  it('a cosine schedule with a total that is not an integer is refused (Infinity was saved as null: lr 0 on resume)', () => {
    const opt = { paramGroups: [{ lr: 0.01 }] };
    expect(() => new WarmupCosineLR(opt, { warmupSteps: 2, totalSteps: Number.POSITIVE_INFINITY })).toThrow(
      /warmupSteps and totalSteps must be integers/,
    );
  });

  it("a tensor-parallel rank's shards are refused on another rank (same names and shapes: they loaded silently)", async () => {
    const shardOf = (rank: number) => {
      const model = new Toy(new Generator(rank + 5));
      for (const p of model.parameters()) markParameterShard(p, { ranks: [0, 1], rank });
      return model;
    };
    const saved = shardOf(0);
    await saveCheckpoint(dir, { model: saved });
    const other = shardOf(1);
    const before = values(other);
    await expect(loadCheckpoint(dir, { model: other })).rejects.toThrow(
      /holds the shards of part 0 of 2, this model the shards of part 1 of 2/,
    );
    expect(values(other)).toEqual(before);
    await expect(loadCheckpoint(dir, { model: new Toy(new Generator(9)) })).rejects.toThrow(
      /this model whole parameters/,
    );
    const same = shardOf(0);
    await loadCheckpoint(dir, { model: same });
    expect(values(same)).toEqual(values(saved));
  });

  it("an optimizer over FSDP's flat shards is refused at save and load (one rank's moments loaded into every rank)", async () => {
    const model = new Toy(new Generator(1));
    const shard = Parameter.fromValues(Float32Array.of(1, 2, 3), [3]); // a flat unit's shard: no parameter of the model
    const group = { ranks: [0, 1], allReduce: () => ({ wait: () => Promise.resolve() }) };
    markGradientShard(shard, group);
    const opt = new Adam([shard], { lr: 0.1 });
    shard.grad = tf.ones([3]);
    opt.step();
    await expect(saveCheckpoint(dir, { model, optimizer: opt, step: 1 })).rejects.toThrow(
      /optimizer parameter 0 is a shard of a flattened unit, no parameter of the model \(FSDP\).*saveFSDPCheckpoint/,
    );
    // and at load, into a file of a plain optimizer
    await saveCheckpoint(dir, { model, optimizer: new Adam(model.parameters(), { lr: 0.1 }), step: 1 });
    await expect(loadCheckpoint(dir, { model, optimizer: opt })).rejects.toThrow(/is a shard of a flattened unit/);
  });

  // probe AE: the file held the parameter's Adam state but not its value: resumed, it stepped on from its initial one
  it("an optimizer parameter that is not the model's is refused at save and load, naming it", async () => {
    const model = new Toy(new Generator(1));
    const temperature = Parameter.fromValues(Float32Array.of(1), [1]);
    const opt = new Adam([...model.parameters(), temperature], { lr: 0.1 });
    const index = model.parameters().length;
    await expect(saveCheckpoint(dir, { model, optimizer: opt, step: 1 })).rejects.toThrow(
      new RegExp(`optimizer parameter ${index} is no parameter of the model: the checkpoint would hold its state`),
    );
    expect(await latestCheckpoint(dir)).toBeNull();
    await saveCheckpoint(dir, { model, optimizer: new Adam(model.parameters(), { lr: 0.1 }), step: 1 });
    await expect(loadCheckpoint(dir, { model, optimizer: opt })).rejects.toThrow(/is no parameter of the model/);
  });

  it('strict: false returns the keys it skipped, as torch does (a prefix mismatch loaded nothing, silently)', async () => {
    const saved = new Toy(new Generator(1));
    await saveCheckpoint(dir, { model: saved, step: 2 });
    const other = new Linear(3, 2); // weight and bias of the same shapes: only the buffer is extra
    const loaded = await loadCheckpoint(dir, { model: other, strict: false });
    expect([loaded.missingKeys, loaded.unexpectedKeys]).toEqual([[], ['count']]);
    const wrapped = new Sequential(new Toy(new Generator(2))); // keys under '0.', as torch's DDP adds 'module.'
    const none = await loadCheckpoint(dir, { model: wrapped, strict: false });
    expect(none.missingKeys).toEqual(['0.weight', '0.bias', '0.count']);
    expect(none.unexpectedKeys).toEqual(['weight', 'bias', 'count']);
  });

  it('a key it does not know is refused at save and load (`optimiser`: its state was neither saved nor loaded)', async () => {
    const model = new Toy(new Generator(1));
    const optimizer = new Adam(model.parameters(), { lr: 0.1 });
    trainSteps(model, optimizer, new Generator(5), 2);
    const state: Record<string, unknown> = { model, optimiser: optimizer, step: 2 }; // built ahead: no excess-key check
    const asContents = state as unknown as Parameters<typeof saveCheckpoint>[1];
    await expect(saveCheckpoint(dir, asContents)).rejects.toThrow(/unknown key "optimiser"/);
    await expect(saveCheckpoint(dir, { model, step: 2 }, { expect_newest: null } as never)).rejects.toThrow(
      CheckpointError,
    );
    expect(await latestCheckpoint(dir)).toBeNull();
    // one object for save and load (step, epoch and extra are what a load returns)
    const contents = { model, optimizer, step: 2, extra: { seen: 64 } };
    await saveCheckpoint(dir, contents);
    expect((await loadCheckpoint(dir, contents)).extra).toEqual({ seen: 64 });
    const rng = { model, rng: new Generator(3) } as unknown as Parameters<typeof loadCheckpoint>[1];
    await expect(loadCheckpoint(dir, rng)).rejects.toThrow(/loadCheckpoint\(.*\): unknown key "rng"/);
    // probe AL: a wrapper (DDP's) given as the model failed untyped ("model.namedParameters is not a function")
    class DistributedDataParallel {
      constructor(readonly module: Toy) {}
    }
    const wrapper = { model: new DistributedDataParallel(model), optimizer } as never;
    const notModule = /the model is DistributedDataParallel, not an nn Module: give the Module itself/;
    await expect(saveCheckpoint(dir, wrapper)).rejects.toThrow(notModule);
    await expect(loadCheckpoint(dir, wrapper)).rejects.toThrow(notModule);
  });

  it('step(closure) and a scheduler step(epoch) are refused (ignored where types are not checked: tsx)', () => {
    const model = new Toy(new Generator(1));
    const optimizer = new SGD(model.parameters(), { lr: 0.1 });
    const scheduler = new StepLR(optimizer, 2);
    const untyped = (f: unknown) => f as (arg: unknown) => void;
    expect(() => untyped(optimizer.step).call(optimizer, () => 1)).toThrow(OptimizerError);
    expect(() => untyped(scheduler.step).call(scheduler, 5)).toThrow(/takes no epoch/);
    expect(scheduler.lastEpoch).toBe(0);
  });

  // was: OptimizerError (the parameter count) on one stage, CheckpointError (the order) on another (probe BD)
  it("a whole model's checkpoint loaded into a part of it (a pipeline stage) names the keys, before the optimizer", async () => {
    const g = new Generator(3);
    const whole = new Sequential(new Linear(3, 4, { generator: g }), new Linear(4, 2, { generator: g }));
    await saveCheckpoint(dir, { model: whole, optimizer: new Adam(whole.parameters()), step: 1 });
    const stage = new Sequential(new Linear(4, 2, { generator: g }));
    const load = loadCheckpoint(dir, { model: stage, optimizer: new Adam(stage.parameters()) });
    await expect(load).rejects.toThrow(StateDictError);
    await expect(loadCheckpoint(dir, { model: stage })).rejects.toThrow(/unexpected.*1\.weight|1\.weight.*unexpected/s);
  });
});

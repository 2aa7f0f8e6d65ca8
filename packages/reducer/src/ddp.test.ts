import { tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup, PeerLostError, ReduceOp } from '@ddp/comm';
import { join } from '@ddp/join';
import { mse, Sequential, Tanh } from '@ddp/nn';
import { getTransferStats, tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assignBuckets } from './bucket-layout.js';
import type { CommHook } from './comm-hooks.js';
import { DistributedDataParallel } from './ddp.js';
import { DDPCommError, DDPUsageError } from './errors.js';
import { DataParallelNaive } from './naive.js';
import { PowerSGDState } from './powersgd.js';
import { mlp, normal, rows } from './test/models.js';

describe('assignBuckets', () => {
  it("closes a bucket once it holds its limit, the first limit being the first bucket's", () => {
    // sizes in floats (4 bytes): first limit 40 bytes, then 100 bytes
    expect(assignBuckets([4, 4, 4, 30, 1, 1, 20], 40, 100)).toEqual([[0, 1, 2], [3], [4, 5, 6]]);
    expect(assignBuckets([100], 40, 100)).toEqual([[0]]);
    expect(assignBuckets([], 40, 100)).toEqual([]);
  });
});

describe('DistributedDataParallel in a world of one', () => {
  beforeAll(async () => {
    await initProcessGroup({ rank: 0, worldSize: 1 });
  });
  afterAll(async () => {
    await destroyProcessGroup();
  });

  it('launches the first bucket while backward has not reached the first layer yet', async () => {
    const model = mlp(1, [5, 8, 3]);
    const ddp = await DistributedDataParallel.create(model, { firstBucketMB: 1e-5, bucketCapMB: 1e-5 });
    const firstLayerDoneAtLaunch: boolean[] = [];
    const recording: CommHook<null> = async (_s, bucket) => {
      firstLayerDoneAtLaunch.push(model.parameters()[0].grad !== null);
      await bucket.processGroup.allReduce(bucket.buffer, { op: ReduceOp.AVG }).wait();
      return bucket.buffer;
    };
    ddp.registerCommHook(null, recording);
    const x = normal([4, 5], 1);
    const y = normal([4, 3], 2);
    const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
    await loss.backward();
    loss.dispose();
    expect(ddp.bucketLayout[0]).toEqual(['2.bias']);
    expect(firstLayerDoneAtLaunch[0]).toBe(false);
    expect(firstLayerDoneAtLaunch.at(-1)).toBe(true);
    expect(() => ddp.registerCommHook(null, recording)).toThrow(DDPUsageError);
    tf.dispose([x, y]);
    model.dispose();
  });

  it('noSync leaves gradients local; the next synced backward reduces their sum', async () => {
    const model = mlp(2);
    const ddp = await DistributedDataParallel.create(model);
    const x = normal([4, 5], 3);
    const y = normal([4, 3], 4);
    const step = async () => {
      const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
      await loss.backward();
      loss.dispose();
    };
    await ddp.noSync(step);
    expect(ddp.iteration).toBe(0);
    const once = [...(model.parameters()[0].grad!.dataSync() as Float32Array)];
    await step();
    expect(ddp.iteration).toBe(1);
    const twice = model.parameters()[0].grad!.dataSync() as Float32Array;
    for (const [i, g] of once.entries()) expect(twice[i]).toBeCloseTo(2 * g, 6);
    tf.dispose([x, y]);
    model.dispose();
  });
  it('a forward while the last backward was not awaited: DDPUsageError saying so, then training goes on', async () => {
    // was: let through before the backward's first bucket; the two backwards' hooks then failed as "marked ready
    // twice … used by several forwards", naming causes that did not apply
    const model = mlp(2);
    const ddp = await DistributedDataParallel.create(model);
    const [x, y] = [normal([4, 5], 3), normal([4, 3], 4)];
    const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
    const running = loss.backward();
    expect(() => ddp.forward(rows(x, 0, 4))).toThrow(DDPUsageError);
    expect(() => ddp.forward(rows(x, 0, 4))).toThrow(/^rank 0: .* still running .* await loss\.backward\(\) first/);
    await running;
    loss.dispose();
    tidy(() => ddp.forward(rows(x, 0, 4))).dispose();
    tf.dispose([x, y]);
    model.dispose();
  });
  it('refuses noSync inside join (was: CollectiveMismatchError on every rank at the next backward)', async () => {
    const model = mlp(2);
    const ddp = await DistributedDataParallel.create(model);
    await expect(join([ddp], () => ddp.noSync(() => 0))).rejects.toThrow(
      /rank 0: noSync inside join: under join every backward must synchronize/,
    );
    expect(await ddp.noSync(() => 1)).toBe(1); // outside join as before
    model.dispose();
  });
  it('a comm hook resolving with fewer or more values than its bucket, or another array: DDPUsageError naming them', async () => {
    // was: one short a bare RangeError out of the copy back; one longer accepted, its tail ignored; a Float64Array
    // listed every value (probe AU)
    for (const delta of [-1, 1, 0]) {
      const model = mlp(3, [5, 16, 3]);
      const ddp = await DistributedDataParallel.create(model);
      const resized: CommHook<null> = async (_s, bucket) =>
        delta === 0
          ? (new Float64Array(bucket.buffer.length) as never)
          : new Float32Array(bucket.buffer.length + delta);
      ddp.registerCommHook(null, resized);
      const [x, y] = [normal([4, 5], 5), normal([4, 3], 6)];
      const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
      const length = model.parameters().reduce((n, p) => n + p.size, 0);
      await expect(loss.backward()).rejects.toThrow(
        new RegExp(
          `^rank 0: the comm hook returned a ${delta === 0 ? 'Float64Array' : 'Float32Array'} of ${length + delta} ` +
            `values for bucket 0 of 1 .*holds ${length}:`,
        ),
      );
      tf.dispose([x, y, loss.data]);
      model.dispose();
    }
  });
  it('copies each gradient once into its bucket and once back into its own storage: no new tensor, no allocation', async () => {
    const model = mlp(3, [5, 16, 3]);
    const ddp = await DistributedDataParallel.create(model, { firstBucketMB: 1e-4, bucketCapMB: 1e-4 });
    // tells averages from local gradients
    const tripled: CommHook<null> = async (_s, bucket) => bucket.buffer.map((v) => 3 * v);
    ddp.registerCommHook(null, tripled);
    const params = model.parameters();
    const total = params.reduce((n, p) => n + p.size, 0);
    const fromBackward = new Map<unknown, unknown>();
    for (const p of params) p.registerPostAccumulateGradHook((q) => void fromBackward.set(q, q.grad));
    const x = normal([4, 5], 5);
    const y = normal([4, 3], 6);
    const step = async () => {
      const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
      await loss.backward();
      loss.dispose();
    };
    await step(); // the first iteration rebuilds the buckets
    const local = params.map((p) => [...(p.grad!.dataSync() as Float32Array)].map((v) => v / 3));
    for (const p of params) p.grad = null;
    const before = getTransferStats();
    const tensorsBefore = tf.memory().numTensors;
    await step();
    const after = getTransferStats();
    expect(after.copiedOut - before.copiedOut).toBe(total); // into the buckets
    expect(after.writtenInPlace - before.writtenInPlace).toBe(total); // the averages, into the gradients' storage
    expect(after.uploaded - before.uploaded).toBe(0);
    expect(tf.memory().numTensors).toBe(tensorsBefore + params.length); // the gradients, and nothing else
    params.forEach((p, i) => {
      expect(p.grad).toBe(fromBackward.get(p)); // the tensor backward made, now holding the averages
      const got = p.grad!.dataSync() as Float32Array;
      for (const [j, v] of local[i].entries()) expect(got[j]).toBeCloseTo(3 * v, 5);
    });
    tf.dispose([x, y]);
    model.dispose();
  });

  it("gives a gradient whose storage something else shares a new tensor, leaving the sharer's values alone", async () => {
    const model = mlp(4);
    const ddp = await DistributedDataParallel.create(model);
    ddp.registerCommHook(null, async (_s, bucket) => bucket.buffer.map((v) => 3 * v));
    const weight = model.parameters()[0];
    let kept: tf.Tensor | null = null;
    weight.registerHook((g) => {
      kept = tf.keep(tf.reshape(g, [g.size])); // shares the gradient's storage
      return g;
    });
    const before = getTransferStats();
    const x = normal([4, 5], 7);
    const y = normal([4, 3], 8);
    const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
    await loss.backward();
    loss.dispose();
    expect(getTransferStats().uploaded - before.uploaded).toBe(weight.size);
    const local = kept!.dataSync() as Float32Array;
    const averaged = weight.grad!.dataSync() as Float32Array;
    for (const [j, v] of local.entries()) expect(averaged[j]).toBeCloseTo(3 * v, 5);
    tf.dispose([x, y, kept!]);
    model.dispose();
  });

  it('DataParallelNaive writes averages in place too, and gives a shared gradient a new tensor', async () => {
    const model = mlp(7);
    const naive = await DataParallelNaive.create(model);
    const [weight, ...rest] = model.parameters();
    let kept: tf.Tensor | null = null;
    weight.registerHook((g) => {
      kept = tf.keep(tf.reshape(g, [g.size]));
      return g;
    });
    const before = getTransferStats();
    const x = normal([4, 5], 11);
    const y = normal([4, 3], 12);
    const loss = tidy(() => mse(naive.forward(rows(x, 0, 4)), rows(y, 0, 4)));
    await loss.backward();
    loss.dispose();
    const after = getTransferStats();
    expect(after.uploaded - before.uploaded).toBe(weight.size);
    expect(after.writtenInPlace - before.writtenInPlace).toBe(rest.reduce((n, p) => n + p.size, 0));
    tf.dispose([x, y, kept!]);
    model.dispose();
  });

  it('checkFinite names the parameter whose average holds NaN or Inf, found in the write-back pass; off, nothing raises', async () => {
    const cases = [
      ['0.weight', 17, Number.NaN, true],
      ['2.bias', 2, Number.NEGATIVE_INFINITY, true],
      ['0.weight', 0, Number.NaN, false],
    ] as const;
    for (const [name, at, bad, checkFinite] of cases) {
      const model = mlp(6); // 2.bias has 3 values: index 2 is the pair loop's odd tail
      const ddp = await DistributedDataParallel.create(model, { checkFinite, firstBucketMB: 1e-4, bucketCapMB: 1e-4 });
      ddp.registerCommHook(null, async (_s, bucket) => {
        const slot = bucket.parameters.find((p) => p.name === name);
        if (slot) bucket.buffer[slot.offset + at] = bad;
        return bucket.buffer;
      });
      const x = normal([4, 5], 9);
      const y = normal([4, 3], 10);
      const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
      const done = loss.backward();
      if (checkFinite)
        await expect(done).rejects.toMatchObject({ name: 'NonFiniteGradientError', parameter: name, value: bad });
      else await done;
      loss.dispose();
      tf.dispose([x, y]);
      model.dispose();
    }
  });

  it('refuses a forward once a parameter was unfrozen or frozen after create (DDP and DataParallelNaive)', async () => {
    for (const wrap of [DistributedDataParallel.create, DataParallelNaive.create] as const) {
      const model = mlp(1, [5, 8, 3]);
      const [w0, b0] = model.parameters();
      w0.requiresGrad = false;
      const wrapped = await wrap(model);
      const data = normal([2, 5], 1);
      const x = rows(data, 0, 2);
      tidy(() => wrapped.forward(x));
      w0.requiresGrad = true;
      expect(() => wrapped.forward(x)).toThrow(DDPUsageError);
      expect(() => wrapped.forward(x)).toThrow(/rank 0.*0\.weight \(now trainable\)/);
      expect(() => wrapped.forward(x)).not.toThrow(/own forward/);
      w0.requiresGrad = false;
      b0.requiresGrad = false;
      // probe BO: a GAN's generator step freezes the discriminator for one pass: the error says how
      expect(() => wrapped.forward(x)).toThrow(/0\.bias \(now frozen\).*call the wrapped module's own forward/);
      data.dispose();
    }
  });

  it('refuses bucket sizes and cap candidates that are not positive, and a module with nothing to synchronise', async () => {
    await expect(DistributedDataParallel.create(mlp(1, [5, 4, 3]), { bucketCapMB: -1 })).rejects.toThrow(DDPUsageError);
    await expect(DistributedDataParallel.create(mlp(1, [5, 4, 3]), { firstBucketMB: 0 })).rejects.toThrow(
      /firstBucketMB must be a positive/,
    );
    await expect(DistributedDataParallel.create(mlp(1, [5, 4, 3]), { bucketCapCandidatesMB: [] })).rejects.toThrow(
      /bucketCapCandidatesMB must be positive/,
    );
    await expect(
      DistributedDataParallel.create(mlp(1, [5, 4, 3]), { bucketCapCandidatesMB: [4, Number.NaN] }),
    ).rejects.toThrow(DDPUsageError);
    await expect(DistributedDataParallel.create(new Sequential(new Tanh()))).rejects.toThrow(
      /no parameter that requires grad/,
    );
  });

  it('refuses options it does not know, as a config ported from PyTorch has them (was: ignored, buffers broadcast)', async () => {
    const config = JSON.parse('{ "broadcast_buffers": false, "find_unused_parameters": true }');
    await expect(DistributedDataParallel.create(mlp(1, [5, 4, 3]), config)).rejects.toThrow(
      /DistributedDataParallel.create: unknown option "broadcast_buffers"; did you mean broadcastBuffers\?/,
    );
    // a config's strings were truthy: `broadcastBuffers: 'false'` broadcast, `checkFinite: 'false'` checked
    for (const name of ['findUnusedParameters', 'broadcastBuffers', 'checkFinite']) {
      await expect(DistributedDataParallel.create(mlp(1, [5, 4, 3]), { [name]: 'false' })).rejects.toThrow(
        `DistributedDataParallel.create: ${name} must be a boolean, got "false"`,
      );
    }
    expect(() => new PowerSGDState({ warmStart: 'no' as never })).toThrow(/PowerSGDState: warmStart must be a boolean/);
    expect(() => new PowerSGDState({ minCompressionRate: '2' as never })).toThrow(
      /minCompressionRate must be a number/,
    );
    // ignored, the gradients were averaged over the whole world instead of the group given
    await expect(DataParallelNaive.create(mlp(1, [5, 4, 3]), { process_group: null } as never)).rejects.toThrow(
      /DataParallelNaive.create: unknown option "process_group"; did you mean processGroup\?/,
    );
    // null is what newGroup gives a rank outside the group: taken for the world, its collectives met no member's
    for (const create of [DistributedDataParallel.create, DataParallelNaive.create])
      await expect(create(mlp(1, [5, 4, 3]), { processGroup: null })).rejects.toThrow(
        /processGroup is null, what newGroup gives a rank outside the group/,
      );
  });
});

describe('DDPCommError', () => {
  it("names join as the cure only outside join; under join, collectives join does not shadow (SyncBatchNorm's)", () => {
    const cause = new Error('ranks called other collectives');
    expect(new DDPCommError(0, 'gradient all-reduce', 3, cause).message).toContain(
      'wrap the training loop in join([ddp], ...)',
    );
    // before: the same advice to a loop already under join
    const underJoin = new DDPCommError(0, 'gradient all-reduce', 3, cause, true).message;
    expect(underJoin).toContain('The loop runs under join, which shadows the collectives of its joinables only');
    expect(underJoin).not.toContain('wrap the training loop in join');
  });

  it('a peer lost to a fault is not sent to join (was the uneven-inputs advice); a peer that left is', () => {
    const killed = new DDPCommError(0, 'gradient all-reduce', 3, new PeerLostError('lost rank 1 (connection closed)'));
    expect(killed.message).toContain('A peer was lost (killed, crashed or unreachable)');
    expect(killed.message).not.toContain('join');
    const left = new PeerLostError('rank 0: rank 1 has left (destroyProcessGroup)');
    expect(new DDPCommError(0, 'gradient all-reduce', 3, left).message).toContain('wrap the training loop in join');
  });
});

describe('PowerSGDState options', () => {
  it('a rank below 1, a fraction, NaN or a torch spelling is refused (rank 0 made every gradient zero, silently)', () => {
    for (const rank of [0, -1, 1.5, Number.NaN])
      expect(() => new PowerSGDState({ matrixApproximationRank: rank })).toThrow(
        /PowerSGDState: matrixApproximationRank must be an integer ≥ 1/,
      );
    expect(() => new PowerSGDState({ startPowerSGDIter: -1 })).toThrow(/startPowerSGDIter must be an integer ≥ 0/);
    expect(() => new PowerSGDState({ matrix_approximation_rank: 2 } as object)).toThrow(DDPUsageError);
    expect(new PowerSGDState({ matrixApproximationRank: 2, startPowerSGDIter: 0 }).rank).toBe(2);
  });
});

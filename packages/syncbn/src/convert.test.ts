import { tensor } from '@ddp/autograd';
import { BatchNorm1d, BatchNorm2d, Conv2d, Linear, Module, mse, ReLU, Sequential, SGD } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { convertSyncBatchnorm, SyncBatchNorm, SyncBatchNormError } from './index.js';

class Net extends Module {
  readonly features = this.registerModule(
    'features',
    new Sequential(new Conv2d(2, 3, 3, { padding: 1 }), new BatchNorm2d(3, { momentum: 0.3 }), new ReLU()),
  );
  readonly head = this.registerModule('head', new BatchNorm1d(3, { eps: 1e-3 }));
  forward(): never {
    throw new Error('not used');
  }
}

describe('SyncBatchNorm construction', () => {
  it('rejects a channel count that is not a positive integer with SyncBatchNormError', () => {
    expect(() => new SyncBatchNorm(-1)).toThrow(SyncBatchNormError);
    expect(() => new SyncBatchNorm(2.5)).toThrow(/numFeatures must be a positive integer, got 2.5/);
  });

  it("refuses torch's positional eps where it takes named options (it was dropped: eps stayed 1e-5)", () => {
    expect(() => new SyncBatchNorm(3, 1e-3 as never)).toThrow(SyncBatchNormError);
    expect(() => new SyncBatchNorm(3, 1e-3 as never)).toThrow(/options must be an object of named options, got 0.001/);
  });
});

describe('convertSyncBatchnorm', () => {
  it('replaces every BatchNorm, keeping options, weights, running stats and state-dict keys', () => {
    const net = new Net();
    const bn = net.features.at(1) as BatchNorm2d;
    bn.weight!.data = tf.tensor([1, 2, 3]);
    bn.runningMean.data = tf.tensor([0.5, -1, 2]);
    const before = new Map([...net.stateDict()].map(([k, v]) => [k, Array.from(v.dataSync())]));
    const out = convertSyncBatchnorm(net);
    expect(out).toBe(net);
    const sync = net.features.at(1);
    expect(sync).toBeInstanceOf(SyncBatchNorm);
    expect([...net.features].map((m) => m.constructor.name)).toEqual(['Conv2d', 'SyncBatchNorm', 'ReLU']);
    expect(net.head).toBeInstanceOf(SyncBatchNorm);
    expect(net.head.eps).toBe(1e-3);
    expect((sync as SyncBatchNorm).momentum).toBe(0.3);
    expect(net.modules().filter((m) => m instanceof SyncBatchNorm)).toHaveLength(2);
    const after = new Map([...net.stateDict()].map(([k, v]) => [k, Array.from(v.dataSync())]));
    expect(after).toEqual(before);
    net.dispose();
  });

  it('returns a SyncBatchNorm for a bare BatchNorm, which without a world behaves like BatchNorm', () => {
    const plain = new BatchNorm1d(2);
    const x = tensor([1, 2, 3, 5, -1, 0], [3, 2]);
    const want = Array.from(plain.forward(x).dataSync());
    const plainStats = Array.from(plain.runningVar.dataSync());
    const ref = new BatchNorm1d(2);
    const sync = convertSyncBatchnorm(ref) as SyncBatchNorm;
    expect(Array.from(sync.forward(x).dataSync())).toEqual(want);
    expect(Array.from(sync.runningVar.dataSync())).toEqual(plainStats);
  });

  // torch's convert_sync_batchnorm moves the same Parameter objects into the new layer, so an
  // optimizer (or anything else holding them) made before the conversion still trains them
  it('keeps the BatchNorm parameters themselves, so an optimizer built before it still steps them', async () => {
    const model = new Sequential(new Linear(3, 2), new BatchNorm1d(2));
    const params = model.parameters();
    const opt = new SGD(params, { lr: 0.5 });
    const converted = convertSyncBatchnorm(model);
    expect(converted.parameters()).toEqual(params);
    for (const [i, p] of converted.parameters().entries()) expect(p, `parameter ${i}`).toBe(params[i]);
    const x = tensor([1, 2, 3, -1, 0, 2, 4, 1, -2], [3, 3]);
    const y = tensor([1, 0, -1, 2, 0, 1], [3, 2]);
    const weight = Array.from((model.at(1) as SyncBatchNorm).weight!.data.dataSync());
    const loss = mse(model.forward(x), y);
    await loss.backward();
    opt.step();
    // before: the optimizer held the disposed BatchNorm's parameters, which got no gradient, so the
    // converted layer's weight and bias never moved, silently
    expect(Array.from((model.at(1) as SyncBatchNorm).weight!.data.dataSync())).not.toEqual(weight);
    expect(params.every((p) => !p.isDisposed)).toBe(true);
    model.dispose();
    // without affine parameters or running statistics: nothing to take over, the same options
    const bare = convertSyncBatchnorm(new BatchNorm1d(2, { affine: false, trackRunningStats: false })) as SyncBatchNorm;
    expect([bare.weight, bare.bias, bare.parameters().length, bare.buffers().length]).toEqual([null, null, 0, 0]);
    expect(Array.from(bare.forward(x.slice([0, 0], [3, 2])).dataSync()).every(Number.isFinite)).toBe(true);
  });
});

// probe AD: newGroup(…) not awaited (torch's new_group is synchronous): the Promise was taken for a group of no
// size, and each rank normalised its own batch alone, silently
it('a processGroup that is a Promise is refused, by the layer and by convertSyncBatchnorm', () => {
  const pending = Promise.resolve(null) as never;
  expect(() => new SyncBatchNorm(3, { processGroup: pending })).toThrow(/processGroup is a Promise \(await newGroup/);
  expect(() => convertSyncBatchnorm(new Sequential(new Linear(2, 2)), pending)).toThrow(/convertSyncBatchnorm/);
});

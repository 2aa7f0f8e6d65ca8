import { tensor } from '@ddp/autograd';
import { BatchNorm1d, BatchNorm2d, Conv2d, Module, ReLU, Sequential } from '@ddp/nn';
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
});

import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, Linear } from '@ddp/nn';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ZeroError } from './errors.js';
import { ZeroRedundancyOptimizer } from './zero-redundancy-optimizer.js';

beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
});
afterAll(async () => {
  await destroyProcessGroup();
});

it('refuses options it does not know, and a boolean option given a string (truthy: taken as true)', () => {
  const params = () => new Linear(3, 2).parameters();
  const make = (zero: object) => () => new ZeroRedundancyOptimizer(params(), Adam, { lr: 0.01 }, zero as never);
  expect(make({ overlap_with_ddp: true })).toThrow(/ZeroRedundancyOptimizer: unknown option "overlap_with_ddp"/);
  expect(make({ parametersAsBucketView: 'false' })).toThrow(ZeroError);
  expect(make({ parametersAsBucketView: 'false' })).toThrow(
    'ZeroRedundancyOptimizer: parametersAsBucketView must be a boolean, got "false"',
  );
  // null is what newGroup gives a rank outside the group: it was taken for the world
  expect(make({ processGroup: null })).toThrow(
    'ZeroRedundancyOptimizer: processGroup is null, what newGroup gives a rank outside the group',
  );
});

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destroyProcessGroup, initProcessGroup, type ProcessGroup } from '@ddp/comm';
import { Generator } from '@ddp/nn';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PowerSGDState } from './powersgd.js';
import { loadPowerSGDState, savePowerSGDState } from './powersgd-checkpoint.js';
import { powerSGDHook } from './powersgd-hook.js';

let pg: ProcessGroup;
beforeAll(async () => {
  pg = await initProcessGroup({ rank: 0, worldSize: 1 });
});
afterAll(async () => {
  await destroyProcessGroup();
});

/** One bucket holding one [4, 4] gradient, as DDP hands it to the hook: the same buffer every step. */
function hookOn(state: PowerSGDState): (gradient: Float32Array) => Promise<Float32Array> {
  const buffer = new Float32Array(16);
  const parameters = [{ name: 'w', param: null as never, index: 0, offset: 0, size: 16, shape: [4, 4] }];
  return (gradient) => {
    buffer.set(gradient);
    return powerSGDHook(state, { index: 0, isLast: true, processGroup: pg, parameters, buffer });
  };
}
/** The rank-k sum of outer products of random columns: a [4, 4] gradient of rank k. */
function ofRank(k: number, seed: number): Float32Array {
  const g = new Generator(seed);
  const [u, v] = [g.normal(4 * k), g.normal(4 * k)];
  const m = new Float32Array(16);
  for (let i = 0; i < 4; i++)
    for (let j = 0; j < 4; j++) for (let c = 0; c < k; c++) m[i * 4 + j] += u[i * k + c] * v[j * k + c];
  return m;
}
const maxDiff = (a: Float32Array, b: Float32Array) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));

describe('PowerSGD after a gradient of lower rank than its own (warm start)', () => {
  // before: a zero column of Q stayed zero, P = MQ lost that rank for good; a layer no rank used in an
  // iteration (M = 0, no error feedback yet) got gradient 0 at every later step, silently
  it('an all-zero gradient (a layer no rank used), then the real ones: each step exact at full rank', async () => {
    for (const useErrorFeedback of [true, false]) {
      const options = { matrixApproximationRank: 4, startPowerSGDIter: 0, minCompressionRate: 0, useErrorFeedback };
      const hook = hookOn(new PowerSGDState(options));
      expect(maxDiff(await hook(new Float32Array(16)), new Float32Array(16))).toBe(0);
      for (const seed of [1, 2, 3]) {
        const g = ofRank(4, seed);
        expect(maxDiff(await hook(g), g)).toBeLessThan(1e-4);
      }
    }
  });

  it('rank 2 after a rank-1 gradient: the second column is drawn again, the rank-2 gradient exact', async () => {
    const hook = hookOn(new PowerSGDState({ matrixApproximationRank: 2, startPowerSGDIter: 0, minCompressionRate: 0 }));
    const g1 = ofRank(1, 4);
    expect(maxDiff(await hook(g1), g1)).toBeLessThan(1e-4);
    const g2 = ofRank(2, 5);
    expect(maxDiff(await hook(g2), g2)).toBeLessThan(1e-4);
  });
});

describe("PowerSGD's state saved and loaded (each rank's own file, bound to the checkpoint's step)", () => {
  const options = { matrixApproximationRank: 1, startPowerSGDIter: 1, minCompressionRate: 0 };

  it('a loaded state continues exactly as the saved one; what does not match is refused, naming it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ddp-powersgd-state-'));
    const file = join(dir, 'powersgd.safetensors');
    const saved = new PowerSGDState(options);
    const hook = hookOn(saved);
    for (const seed of [6, 7, 8]) await hook(ofRank(2, seed));
    await savePowerSGDState(file, saved, { step: 3 });
    const loaded = new PowerSGDState(options);
    await loadPowerSGDState(file, loaded, { step: 3 });
    expect(loaded.iter).toBe(3);
    const [next, again] = [await hook(ofRank(2, 9)), await hookOn(loaded)(ofRank(2, 9))];
    expect(maxDiff(again, next)).toBe(0);

    await expect(loadPowerSGDState(file, new PowerSGDState(options), { step: 4 })).rejects.toThrow(
      /the state is of step 3, the model was loaded at step 4/,
    );
    await expect(
      loadPowerSGDState(file, new PowerSGDState({ ...options, matrixApproximationRank: 2 }), { step: 3 }),
    ).rejects.toThrow(/saved with matrixApproximationRank 1, this one has 2/);
    await expect(loadPowerSGDState(file, loaded, { step: 3 })).rejects.toThrow(/before the first backward/);
    await rm(dir, { recursive: true, force: true });
  });

  it("another rank's or world's state, or another model's, is a DDPUsageError at its first compression", async () => {
    const saved = new PowerSGDState(options);
    for (const seed of [6, 7]) await hookOn(saved)(ofRank(2, seed));
    const otherRank = new PowerSGDState(options);
    otherRank.loadStateDict({ ...saved.stateDict(), rank: 1, worldSize: 2 });
    await expect(hookOn(otherRank)(ofRank(2, 9))).rejects.toThrow(
      /rank 0: PowerSGD state loaded from rank 1 of 2, this is rank 0 of 1/,
    );
    const resaved = new PowerSGDState(options); // loaded, saved again before compressing: still rank 1 of 2's
    resaved.loadStateDict({ ...saved.stateDict(), rank: 1, worldSize: 2 });
    expect([resaved.stateDict().rank, resaved.stateDict().worldSize]).toEqual([1, 2]);
    const sd = saved.stateDict();
    const otherModel = new PowerSGDState(options);
    otherModel.loadStateDict({ ...sd, parameters: new Map([[0, { error: new Float32Array(9) }]]) });
    await expect(hookOn(otherModel)(ofRank(2, 9))).rejects.toThrow(/parameter 0 holds 9 error and 0 Q values/);
  });
});

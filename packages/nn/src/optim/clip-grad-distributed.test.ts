import { markGradientShard, type NormReduceGroup } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { Parameter } from '../parameter.js';
import { clipGradNorm, clipGradNormDistributed } from './clip-grad.js';
import { OptimizerError } from './optimizer.js';

/** A process group of `members` simulated ranks in this process: allReduce completes when all have called it. */
function simulatedGroup(ranks: number[]): NormReduceGroup {
  let arrived: { buf: Float64Array; done: () => void }[] = [];
  return {
    ranks,
    allReduce(buf, { op }) {
      const wait = new Promise<void>((done) => {
        arrived.push({ buf, done });
        if (arrived.length < ranks.length) return;
        const all = arrived;
        arrived = [];
        const out = all[0]?.buf.map((_, i) => {
          const values = all.map((a) => a.buf[i]);
          return op === 'max' ? Math.max(...values) : values.reduce((a, b) => a + b);
        });
        for (const a of all) {
          a.buf.set(out ?? []);
          a.done();
        }
      });
      return { wait: () => wait };
    },
  };
}

/** Whole gradients of a 2-stage model: per stage a weight split over tp (its halves) and a replicated norm weight. */
const WHOLE = [
  { weight: [3, -1, 2, 5], norm: [0.5, -2] },
  { weight: [1, 4, -6, 2], norm: [7, 1] },
];

/** Rank (stage, tp) of a tp 2 × pp 2 grid: its half of its stage's weight, and the whole norm weight. */
function rankParams(stage: number, tp: number, tpGroup: NormReduceGroup, ppGroup: NormReduceGroup) {
  const whole = WHOLE[stage] as (typeof WHOLE)[number];
  const weight = new Parameter(tf.zeros([2]));
  weight.grad = tf.tensor(whole.weight.slice(2 * tp, 2 * tp + 2));
  const norm = new Parameter(tf.zeros([2]));
  norm.grad = tf.tensor(whole.norm);
  markGradientShard(weight, tpGroup);
  markGradientShard(weight, ppGroup);
  markGradientShard(norm, ppGroup);
  return [weight, norm];
}

describe('clipGradNormDistributed', () => {
  for (const normType of [2, 1, Number.POSITIVE_INFINITY]) {
    it(`over tp 2 × pp 2 (norm ${normType}): every rank the whole model's norm and clip`, async () => {
      const tpGroups = [simulatedGroup([0, 1]), simulatedGroup([2, 3])];
      const ppGroups = [simulatedGroup([0, 2]), simulatedGroup([1, 3])];
      const ranks = [0, 1].flatMap((stage) => [0, 1].map((tp) => ({ stage, tp })));
      const params = ranks.map(({ stage, tp }) =>
        rankParams(stage, tp, tpGroups[stage] as NormReduceGroup, ppGroups[tp] as NormReduceGroup),
      );
      const whole = WHOLE.flatMap((s) => [s.weight, s.norm]).map((g) => {
        const p = new Parameter(tf.zeros([g.length]));
        p.grad = tf.tensor(g);
        return p;
      });
      const want = clipGradNorm(whole, 1, normType);
      const totals = await Promise.all(
        ranks.map(({ stage, tp }, r) =>
          clipGradNormDistributed(params[r] as Parameter[], 1, {
            groups: [tpGroups[stage] as NormReduceGroup, ppGroups[tp] as NormReduceGroup],
            normType,
          }),
        ),
      );
      for (const t of totals) expect(t).toBeCloseTo(want, 4);
      for (const [r, { stage, tp }] of ranks.entries()) {
        const [weight, norm] = params[r] as Parameter[];
        const wantWeight = (whole[2 * stage] as Parameter).grad?.dataSync().slice(2 * tp, 2 * tp + 2);
        expect([...(weight?.grad?.dataSync() ?? [])]).toEqual([...(wantWeight ?? [])].map((v) => expect.closeTo(v, 5)));
        const wantNorm = (whole[2 * stage + 1] as Parameter).grad?.dataSync() ?? [];
        expect([...(norm?.grad?.dataSync() ?? [])]).toEqual([...wantNorm].map((v) => expect.closeTo(v, 5)));
      }
      for (const p of [...params.flat(), ...whole]) p.dispose();
    });
  }

  it('clipGradNorm refuses a gradient split over ranks, naming the group; the distributed one needs its group', async () => {
    const tp = simulatedGroup([0, 1]);
    const [weight, norm] = rankParams(0, 0, tp, simulatedGroup([0, 2]));
    expect(() => clipGradNorm([weight as Parameter, norm as Parameter], 1)).toThrow(OptimizerError);
    expect(() => clipGradNorm([weight as Parameter, norm as Parameter], 1)).toThrow(
      /gradient 0 is split over the ranks \[0,1\] and \[0,2\].*clipGradNormDistributed/,
    );
    await expect(clipGradNormDistributed([weight as Parameter], 1, { groups: [tp] })).rejects.toThrow(
      /gradient 0 is split over \[0,2\], not in groups/,
    );
    weight?.dispose();
    norm?.dispose();
  });

  it('refuses a shard without a gradient too (a ZeRO-2 rank that owns no parameter returned 0 and went on)', () => {
    const shard = new Parameter(tf.zeros([2]));
    markGradientShard(shard, simulatedGroup([0, 1, 2]));
    expect(() => clipGradNorm([shard], 1)).toThrow(/gradient 0 is split over the ranks \[0,1,2\]/);
    shard.dispose();
  });

  it("refuses a disposed or freed parameter, as the optimizer (over FSDP's resharded parameters it returned 0 and clipped nothing)", async () => {
    const kept = new Parameter(tf.ones([2]));
    kept.grad = tf.fill([2], 3);
    const replaced = new Parameter(tf.ones([2]));
    replaced.dispose();
    const freed = new Parameter(tf.ones([2]));
    freed.free('fsdp: resharded; clip over the shards');
    expect(() => clipGradNorm([kept, replaced], 1)).toThrow(
      /clipGradNorm: parameter 1 was disposed .*model\.parameters\(\)/,
    );
    expect(() => clipGradNorm([freed, kept], 1)).toThrow(/clipGradNorm: parameter 0 is freed: fsdp: resharded/);
    const group = simulatedGroup([0]);
    await expect(clipGradNormDistributed([kept, freed], 1, { groups: [group] })).rejects.toThrow(
      /clipGradNormDistributed: parameter 1 is freed/,
    );
    expect(kept.grad?.dataSync()).toEqual(new Float32Array([3, 3])); // nothing scaled
    kept.dispose();
  });

  it("refuses an option it does not know (a misspelt norm_type clipped by the 2-norm), and raises on a non-finite norm with errorIfNonfinite, as torch's error_if_nonfinite", async () => {
    const group = simulatedGroup([0]);
    const p = new Parameter(tf.zeros([3]));
    p.grad = tf.tensor([3, 4, 0]);
    const misspelt = { groups: [group], norm_type: Number.POSITIVE_INFINITY } as never;
    await expect(clipGradNormDistributed([p], 1, misspelt)).rejects.toThrow(/unknown option "norm_type"/);
    // torch.nn.utils.clip_grad_norm_([p], 1, norm_type=inf) → 4, grad [0.75, 1, 0]
    expect(await clipGradNormDistributed([p], 1, { groups: [group], normType: Number.POSITIVE_INFINITY })).toBe(4);
    expect([...p.grad.dataSync()].map((v) => Math.round(v * 1e5) / 1e5)).toEqual([0.75, 1, 0]);
    p.grad = tf.tensor([Number.NaN, 1, 0]);
    await expect(clipGradNormDistributed([p], 1, { groups: [group], errorIfNonfinite: true })).rejects.toThrow(
      /clipGradNormDistributed: the total norm of the gradients is NaN, so they cannot be clipped/,
    );
    expect(() => clipGradNorm([p], 1, 2, true)).toThrow(/clipGradNorm: the total norm of the gradients is NaN/);
    expect(p.grad.dataSync()[1]).toBe(1); // left as it was
    expect(Number.isNaN(clipGradNorm([p], 1))).toBe(true); // without it, torch's default: clipped to NaN
    p.dispose();
  });
});

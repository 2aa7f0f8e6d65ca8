import { findFreePort } from '@ddp/launch';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectParamsClose, maxAbsDiff, okResultsOf, resultsOf } from './test/expect.js';
import { loadGolden, MLP_KEYS } from './test/models.js';
import { runWorld, type WorldResult } from './test/run-ranks.js';

const golden = loadGolden();
type Params = Record<string, number[]>;

/**
 * Every guarantee with the gradients copied into the buckets (the small ones: all, by default, here) and reduced in
 * place (all).
 */
const STORAGE = [
  ['copied', {}],
  ['reduced in place', { DDP_IN_PLACE_MIN_BYTES: '4' }],
] as const;

for (const [storage, env] of STORAGE)
  for (const world of [2, 3]) {
    describe(`DistributedDataParallel on ${world} real processes, gradients ${storage}`, () => {
      let results: WorldResult;
      const scenarios =
        world === 2
          ? [
              'golden',
              'goldenNaive',
              'transformer',
              'transformerAutotune',
              'tunerAgreement',
              'noSync',
              'unusedError',
              'unusedFound',
              'unusedOnSomeRanks',
              'unusedAfterNoSync',
              'tied',
              'buffers',
              'twoModels',
            ]
          : [
              'golden',
              'transformer',
              'noSync',
              'unusedOnSomeRanks',
              'joinInitial',
              'joinActive',
              'joinActiveHook',
              'joinBuffers',
              'shapeMismatch',
              'loadedOtherSaves',
              'shardSpanning',
              'nonFinite',
              'nonFiniteShares',
              'twoModels',
            ];
      beforeAll(async () => {
        results = await runWorld(await findFreePort(), world, scenarios, 150_000, env);
      }, 160_000);

      for (const scenario of world === 2 ? ['golden', 'goldenNaive'] : ['golden']) {
        it(`${scenario}: reproduces mlp_sgd_3steps.json within 1e-5 on every rank`, () => {
          for (const r of okResultsOf(results, scenario)) {
            (r.steps as Params[]).forEach((step, s) => {
              const want = Object.fromEntries(
                Object.entries(MLP_KEYS).map(([g, key]) => [
                  key,
                  golden.outputs.weights_after_step[s][g as keyof typeof MLP_KEYS].data,
                ]),
              );
              expectParamsClose(step, want, 1e-5);
            });
          }
        });
      }

      it('transformer: 20 AdamW steps match the single process on the global batch within 1e-4, buckets agree, memory flat', () => {
        const ranks = okResultsOf(results, 'transformer');
        const reference = ranks[0].reference as Params;
        for (const r of ranks) {
          expectParamsClose(r.params as Params, reference, 1e-4);
          expect(r.rebuiltLayout).toEqual(ranks[0].rebuiltLayout);
          const [at5, at20] = r.numTensors as number[];
          expect(at20).toBe(at5);
          expect(r.tuning).toBeNull(); // an explicit bucketCapMB is kept
          expect(r.capMB).toBe(0.01);
        }
        const layout = ranks[0].rebuiltLayout as string[][];
        expect(layout.length).toBeGreaterThan(2);
        expect(layout.flat().sort()).toEqual((ranks[0].initialLayout as string[][]).flat().sort());
      });

      if (world === 2) {
        it('bucket cap autotune: every rank tries the same caps and keeps the same one; training still matches the single process', () => {
          const ranks = okResultsOf(results, 'transformerAutotune');
          const tuning = ranks[0].tuning as { candidatesMB: number[]; msPerIteration: number[]; chosenMB: number };
          expect(tuning.candidatesMB).toEqual([0.004, 0.01, 1]);
          expect(tuning.candidatesMB).toContain(tuning.chosenMB);
          // 1 MiB holds every gradient: that candidate is one bucket, the first (0.002 MiB) included
          expect(ranks[0].bucketsPerStep).toContain(1);
          for (const r of ranks) {
            expect(r.bucketsPerStep).toEqual(ranks[0].bucketsPerStep);
            expect(r.tuning).toEqual(tuning);
            expect(r.capMB).toBe(tuning.chosenMB);
            expect(r.rebuiltLayout).toEqual(ranks[0].rebuiltLayout);
            expectParamsClose(r.params as Params, ranks[0].reference as Params, 1e-4);
          }
        });

        it('bucket cap autotune: ranks that find different caps fastest agree on the one whose slowest rank is fastest', () => {
          for (const r of okResultsOf(results, 'tunerAgreement')) {
            expect(r.first).toBe(0.004);
            expect(r.changes).toEqual([0.008, 1, 0.004, 0.008, 1, 1]);
            expect(r.result).toEqual({ candidatesMB: [0.004, 0.008, 1], msPerIteration: [30, 30, 25], chosenMB: 1 });
          }
        });
      }

      it('noSync over 4 micro-batches then a synced step equals one step on the concatenated batch', () => {
        const ranks = okResultsOf(results, 'noSync');
        for (const r of ranks) expectParamsClose(r.params as Params, ranks[0].reference as Params, 1e-5);
      });

      it("findUnusedParameters: a layer used on one rank only gets that rank's gradient averaged", () => {
        const ranks = okResultsOf(results, 'unusedOnSomeRanks');
        for (const r of ranks) expectParamsClose(r.grads as Params, ranks[0].reference as Params, 1e-6);
      });

      if (world === 3) {
        it('join with 5 + r batches on rank r: every rank ends with the parameters divideByInitialWorldSize prescribes', () => {
          for (const scenario of ['joinInitial', 'joinActive', 'joinActiveHook']) {
            const ranks = okResultsOf(results, scenario);
            for (const r of ranks) {
              expectParamsClose(r.params as Params, ranks[0].reference as Params, 1e-5);
              expect(r.iterations).toBe(14); // two epochs; joined ranks shadowed the iterations they had no batch for
              // zeroed (or set to zeros) before joining: nothing a shadowed iteration wrote is left
              expect(Math.max(...(r.gradsAfterJoin as number[]))).toBe(0);
            }
          }
          // a hook's result is not rescaled by N / active (Adasum of g and zeros is g; it became N / active · g)
          for (const r of okResultsOf(results, 'joinActiveHook'))
            expect(r.warnings).toContain('DDP_JOIN_DIVIDE_WITH_HOOK');
          for (const r of okResultsOf(results, 'joinActive'))
            expect(r.warnings).not.toContain('DDP_JOIN_DIVIDE_WITH_HOOK');
          // the two divisors really lead to different models
          const a = okResultsOf(results, 'joinInitial')[0].reference as Params;
          const b = okResultsOf(results, 'joinActive')[0].reference as Params;
          expect(Math.abs(a['0.weight'][0] - b['0.weight'][0])).toBeGreaterThan(1e-5);
        });

        it('join with batch norm, 2 + r batches on rank r: every rank ends with the running statistics of every step, not those of the first rank to join', () => {
          const ranks = okResultsOf(results, 'joinBuffers');
          const want = ranks[0].reference as number[];
          for (const r of ranks)
            for (const [i, v] of (r.runningMean as number[]).entries()) expect(v).toBeCloseTo(want[i], 6);
        });

        it('parameter shapes that differ across ranks raise ParameterMismatchError naming the parameter and ranks, on every rank', () => {
          for (const r of resultsOf(results, 'shapeMismatch')) {
            expect(r.error?.name).toBe('ParameterMismatchError');
            expect(r.error?.message).toMatch(
              /"0\.weight" differs between ranks 0 and 1: shape \[8, 5\] on rank 0, \[9, 5\] on rank 1/,
            );
          }
        });

        it('modules loaded from different saves on different ranks raise DDPUsageError at create, on every rank', () => {
          // before: rank 0's weights broadcast over them, each rank's own optimizer state and step kept (probe AO)
          for (const [rank, r] of okResultsOf(results, 'loadedOtherSaves').entries()) {
            expect(r.mixed).toMatch(/^DDPUsageError: .*loaded their module from different checkpoint saves/);
            expect(r.mixed).toMatch(new RegExp(`\\(this rank: .*/${(rank % 2) + 1}/`));
            expect(r.rank0Only).toBe('created');
          }
        });

        it("a tensor-parallel shard with two parts in the DDP group raises DDPUsageError on every rank (was: rank 0's part copied over the other's)", () => {
          for (const r of resultsOf(results, 'shardSpanning')) {
            expect(r.error?.name).toBe('DDPUsageError');
            expect(r.error?.message).toMatch(/parameter 0\.weight is a tensor-parallel shard \(here part of ranks /);
            expect(r.error?.message).toMatch(/\[(0,1|2)\]\), and the group \[0,1,2\] holds several parts of one shard/);
          }
        });

        it('checkFinite names the parameter whose averaged gradient is NaN, on every rank', () => {
          for (const r of resultsOf(results, 'nonFinite')) {
            expect(r.error?.name).toBe('NonFiniteGradientError');
            expect(r.error?.message).toContain('"2.bias" holds NaN');
          }
        });

        it("each rank checks its share of the averages: a NaN or ±Infinity in any rank's share raises on every rank", () => {
          const ranks = okResultsOf(results, 'nonFiniteShares');
          for (const r of ranks) {
            expect(r.clean).toEqual(['ok', 'ok', 'ok']);
            const trials = r.trials as { want: string; got: string }[];
            expect(trials.length).toBeGreaterThanOrEqual(world * 4); // every rank's share of every gradient
            for (const { want, got } of trials) expect(got).toBe(want);
          }
        });
      }

      if (world === 2) {
        it("buffers are rank 0's after create (bool ones too, broadcastBuffers off too), after a synced backward unless it is off, and after syncBuffers", () => {
          const [r0, r1] = okResultsOf(results, 'buffers');
          expect(r1.synced).toEqual(r0.synced);
          expect(r1.local).not.toEqual(r0.local);
          // create broadcasts every buffer, whatever broadcastBuffers says and whatever its dtype (torch);
          // before: not with broadcastBuffers off, and never a bool one
          for (const mode of ['synced', 'local']) {
            const created = r1[`created ${mode}`] as [string, string, number[]][];
            expect(created).toEqual(r0[`created ${mode}`]);
            expect(created.find(([name]) => name.endsWith('mask'))?.slice(1)).toEqual(['bool', [1, 1, 1]]);
            expect(created.find(([name]) => name.endsWith('running_mean'))?.[2]).toEqual([1, 1, 1, 1]);
          }
          // forwards without backward: each rank's own statistics, one warning naming the mend; then rank 0's
          expect(r1.skipped).not.toEqual(r0.skipped);
          expect(r1.mended).toEqual(r0.skipped);
          for (const r of [r0, r1]) {
            expect(r.warnings).toHaveLength(1);
            expect((r.warnings as string[])[0]).toMatch(/backward never ran.*await ddp.syncBuffers\(\)/);
          }
        });

        it('without findUnusedParameters, a parameter without gradient raises an error naming it on every rank', () => {
          for (const r of resultsOf(results, 'unusedError')) {
            expect(r.error?.name).toBe('UnusedParametersError');
            expect(r.error?.message).toContain('extra.weight');
            expect(r.error?.message).toContain('extra.bias');
            expect(r.error?.message).toContain('findUnusedParameters');
          }
        });

        it('with findUnusedParameters, unused everywhere keeps grad null and the rest is exact', () => {
          const ranks = okResultsOf(results, 'unusedFound');
          for (const r of ranks) {
            expectParamsClose(r.grads as Params, ranks[0].reference as Params, 1e-6);
            expect((r.grads as Record<string, unknown>)['extra.weight']).toBeNull();
          }
        });

        it('findUnusedParameters with noSync: a gradient accumulated by a layer the synced backward did not reach is averaged, not dropped', () => {
          for (const r of okResultsOf(results, 'unusedAfterNoSync')) {
            const cases = r.cases as { grads: Params; reference: Params }[];
            const reference = okResultsOf(results, 'unusedAfterNoSync')[0].cases as { reference: Params }[];
            for (const [i, c] of cases.entries()) expectParamsClose(c.grads, reference[i].reference, 1e-6);
          }
        });

        it('tied weights (embedding reused as the output projection) get the summed, averaged gradient', () => {
          const ranks = okResultsOf(results, 'tied');
          for (const r of ranks) expectParamsClose(r.grads as Params, ranks[0].reference as Params, 1e-6);
        });
      }

      it("two DDP models on one group, backwards at once: each model's own averages; in another order per rank: typed", () => {
        const ranks = okResultsOf(results, 'twoModels') as Record<string, Record<'a' | 'b', Params>>[];
        for (const r of ranks) {
          for (const order of ['sequential', 'concurrent'])
            for (const m of ['a', 'b'] as const) expectParamsClose(r[order][m], ranks[0].sequential[m], 1e-7);
          expect(r.reversed).toMatch(/^DDPCommError: .*(CommTimeoutError|PeerLostError)/);
        }
        const { a, b } = ranks[0].sequential;
        expect(maxAbsDiff(a['0.weight'], b['0.weight'])).toBeGreaterThan(1e-3); // the models differ: a mix would show
      });
    });
  }

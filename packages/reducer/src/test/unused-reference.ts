// Test-only: DDP's gradients against rank 0's single-process reference when ranks' forwards
// differ (unused parameters), for the scenarios in scenarios-core.ts.
import { tidy } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { Generator, Linear, Module, mse } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { DistributedDataParallel } from '../index.js';
import { gradSnapshot, normal, rows } from './models.js';

/** A model whose `extra` layer is used on the ranks listed in `extraOn` only. */
class Branchy extends Module {
  readonly a: Linear;
  readonly extra: Linear;
  constructor(public useExtra: boolean) {
    super();
    const generator = new Generator(11);
    this.a = this.registerModule('a', new Linear(5, 3, { generator }));
    this.extra = this.registerModule('extra', new Linear(5, 3, { generator }));
  }
  forward(x: ReturnType<typeof rows>): ReturnType<typeof rows> {
    const y = this.a.forward(x);
    return this.useExtra ? y.add(this.extra.forward(x)) : y;
  }
}

/**
 * Gradients of DDP vs. rank 0's single process on Σ_r loss_r / N, where rank r's forward
 * may differ (extraOn). Returns the error instead when DDP raises.
 */
export async function gradsVsReference(
  pg: ProcessGroup,
  makeModel: (rank: number) => Module,
  lossOf: (m: Module, rank: number) => ReturnType<typeof rows>,
  findUnusedParameters: boolean,
): Promise<Record<string, unknown>> {
  let reference: Record<string, number[] | null> | null = null;
  if (pg.rank === 0) {
    for (let r = 0; r < pg.size; r++) {
      const ref = makeModel(r);
      const loss = tidy(() => lossOf(ref, r).div(pg.size));
      await loss.backward();
      loss.dispose();
      const grads = gradSnapshot(ref);
      reference ??= Object.fromEntries(Object.keys(grads).map((k) => [k, null]));
      for (const [k, g] of Object.entries(grads))
        if (g) reference[k] = reference[k] ? reference[k].map((v, i) => v + g[i]) : g;
      ref.dispose();
    }
  }
  const model = makeModel(pg.rank);
  const ddp = await DistributedDataParallel.create(model, {
    findUnusedParameters,
    firstBucketMB: 1e-4,
    bucketCapMB: 1e-4,
  });
  const loss = tidy(() => lossOf(ddp.module, pg.rank));
  try {
    await loss.backward();
  } catch (e) {
    return { error: { name: (e as Error).name, message: (e as Error).message } };
  } finally {
    loss.dispose();
  }
  return { grads: gradSnapshot(model), reference };
}

export const branchyLoss = (m: Module, r: number) => {
  const x = normal([4, 5], 50 + r);
  const y = normal([4, 3], 60 + r);
  const out = mse((m as Branchy).forward(rows(x, 0, 4)), rows(y, 0, 4));
  tf.dispose([x, y]);
  return out;
};
export const branchy = (extraOn: (r: number) => boolean) => (r: number) => new Branchy(extraOn(r));

/**
 * Two micro-batches per rank, the first under noSync, `extra` used on the ranks and micro-batches
 * `extraOn(rank, micro)` says: DDP's gradients after the synced one vs rank 0's single process
 * on Σ_r Σ_micro loss / N. A gradient accumulated under noSync by a layer the synced backward does
 * not reach is still that rank's share (it was replaced by zeros).
 */
export async function accumulatedVsReference(
  pg: ProcessGroup,
  extraOn: (rank: number, micro: number) => boolean,
): Promise<Record<string, unknown>> {
  const lossOn = (m: Branchy, rank: number, micro: number) => {
    m.useExtra = extraOn(rank, micro);
    return branchyLoss(m, rank + 10 * micro);
  };
  let reference: Record<string, number[] | null> | null = null;
  if (pg.rank === 0) {
    const ref = new Branchy(false);
    for (let r = 0; r < pg.size; r++) {
      for (const micro of [0, 1]) {
        const loss = tidy(() => lossOn(ref, r, micro).div(pg.size));
        await loss.backward();
        loss.dispose();
      }
    }
    reference = gradSnapshot(ref);
    ref.dispose();
  }
  const model = new Branchy(false);
  const ddp = await DistributedDataParallel.create(model, { findUnusedParameters: true, bucketCapMB: 1e-4 });
  for (const micro of [0, 1]) {
    const step = async () => {
      const loss = tidy(() => lossOn(ddp.module as Branchy, pg.rank, micro));
      await loss.backward();
      loss.dispose();
    };
    await (micro === 0 ? ddp.noSync(step) : step());
  }
  return { grads: gradSnapshot(model), reference };
}

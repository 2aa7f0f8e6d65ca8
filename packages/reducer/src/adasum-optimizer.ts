import { firstSplitAmong, gradientReducer, type Tensor, whileWriting } from '@ddp/autograd';
import { checkGroup, getDefaultGroup, type ProcessGroup, sharedArray } from '@ddp/comm';
import { refusePendingGradients, refuseStepArguments } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { AdasumError, adasumAllReduce, checkAdasumGroup, type Segment } from './adasum.js';
import { refuseSpanningShards } from './sync.js';

/** What AdasumOptimizer needs of the optimizer it wraps (any @ddp/nn optimizer). */
export interface LocalOptimizer {
  readonly paramGroups: readonly { params: Tensor[] }[];
  step(): void;
  zeroGrad(setToNone?: boolean): void;
}

/**
 * Horovod's Adasum optimizer (its `_DistributedAdasumOptimizer`, what `hvd.DistributedOptimizer(opt,
 * op=hvd.Adasum)` builds): each rank takes the wrapped optimizer's step on its OWN gradients,
 * with the single-worker learning rate and its own optimizer state, and the ranks combine the
 * steps' deltas with Adasum (per parameter), so every rank lands on start + Adasum(deltas).
 * Gradients are not all-reduced first: use it without DDP, on replicas that start equal (same
 * seed, or a broadcast). For plain SGD the delta is −lr·g and this equals adasumHook; for
 * momentum, Adam or LAMB it differs (Adasum sees each rank's full step, as the paper asks).
 * A power-of-two group only (else AdasumError here, on every rank); a failed combination puts
 * the parameters back where the step began (the local optimizer state keeps the step).
 */
export class AdasumOptimizer {
  private readonly params: Tensor[];
  private readonly segments: Segment[];
  private readonly delta: Float32Array;
  private readonly start: Float32Array;
  /** The first step's check that no tensor-parallel shard has two parts in the group (collective). */
  private shardsChecked: Promise<void> | null = null;

  constructor(
    readonly optimizer: LocalOptimizer,
    readonly processGroup: ProcessGroup = getDefaultGroup(),
  ) {
    checkAdasumGroup(checkGroup(processGroup, 'AdasumOptimizer'));
    this.params = optimizer.paramGroups.flatMap((g) => g.params);
    // FSDP's shards (gradient shards over this group): each rank's delta is another part of the
    // parameter, and Adasum combined them as one (silently)
    const split = firstSplitAmong(this.params, processGroup.ranks);
    if (split >= 0)
      throw new AdasumError(
        `AdasumOptimizer: parameter ${split} is a shard whose parts other ranks of the group hold (FSDP's, ZeRO's): ` +
          "Adasum combines replicas' deltas; wrap an optimizer over whole, replicated parameters",
      );
    // a distributed optimizer (ZeRO's step is async and averages the gradients): its step ran after
    // the deltas were read, and the deltas were every rank's same step anyway (silently no Adasum)
    if (optimizer.step.constructor.name === 'AsyncFunction')
      throw new AdasumError(
        `AdasumOptimizer: ${optimizer.constructor.name}.step() is asynchronous (a distributed optimizer): ` +
          'wrap a local optimizer (SGD, Adam, …); Adasum does the combining',
      );
    let offset = 0;
    this.segments = this.params.map((p) => {
      const segment = { offset, size: p.data.size };
      offset += segment.size;
      return segment;
    });
    this.delta = sharedArray(Float32Array, offset);
    this.start = new Float32Array(offset);
  }

  /** The wrapped optimizer's groups (Horovod's DistributedOptimizer has param_groups: GradScaler unscales them). */
  get paramGroups(): LocalOptimizer['paramGroups'] {
    return this.optimizer.paramGroups;
  }

  /** The local step, then the Adasum of every rank's delta applied from where the step began (collective). */
  async step(...args: []): Promise<void> {
    refuseStepArguments('AdasumOptimizer', args);
    refusePendingGradients('AdasumOptimizer.step()', this.params);
    refuseReducedGradients(this.params);
    // not awaited, zeroGrad cleared the gradients before the local step read them: it never trained (probe X)
    return whileWriting(this.params, 'AdasumOptimizer.step()', 'values', () => this.stepNow());
  }

  private async stepNow(): Promise<void> {
    this.shardsChecked ??= refuseSpanningShards(
      this.params.map((p, i) => [String(i), p]),
      this.processGroup,
      'AdasumOptimizer',
      (message) => new AdasumError(message),
    );
    await this.shardsChecked;
    this.params.forEach((p, i) => {
      this.start.set(p.data.dataSync(), this.segments[i].offset);
    });
    this.optimizer.step();
    this.params.forEach((p, i) => {
      const { offset, size } = this.segments[i];
      const now = p.data.dataSync();
      for (let j = 0; j < size; j++) this.delta[offset + j] = now[j] - this.start[offset + j];
    });
    try {
      await adasumAllReduce(this.delta, this.processGroup, this.segments);
    } catch (e) {
      // back to where every rank began, not left on this rank's own step
      this.delta.fill(0);
      this.apply();
      throw e;
    }
    this.apply();
  }

  /** Every parameter := start + delta. */
  private apply(): void {
    this.params.forEach((p, i) => {
      const { offset, size } = this.segments[i];
      const next = new Float32Array(size);
      for (let j = 0; j < size; j++) next[j] = this.start[offset + j] + this.delta[offset + j];
      p.data = tf.tensor(next, p.data.shape, 'float32');
    });
  }

  zeroGrad(setToNone = true): void {
    this.optimizer.zeroGrad(setToNone);
  }
}

/**
 * Refuses gradients a wrapper averages across ranks (DDP, ZeRO stage 2, a pipeline's dpGroup): every
 * rank then took the same step, and Adasum of equal deltas is that step (plain averaging, silently).
 * Asked at each step: the wrapper may come after the optimizer.
 */
function refuseReducedGradients(params: readonly Tensor[]): void {
  const i = params.findIndex((p) => gradientReducer(p) !== null);
  if (i >= 0)
    throw new AdasumError(
      `AdasumOptimizer.step(): parameter ${i}'s gradient is averaged across ranks by ${gradientReducer(params[i])}, ` +
        'so every rank took the same step and Adasum would combine nothing: use AdasumOptimizer without it ' +
        '(or adasumHook as the DDP comm hook)',
    );
}

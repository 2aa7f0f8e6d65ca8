import { type Tensor, whileWriting } from '@ddp/autograd';
import { groupOrWorld, type ProcessGroup } from '@ddp/comm';
import { type Joinable, type JoinHook, type JoinHookOptions, notifyJoinContext } from '@ddp/join';
import type { LoadedSave, OptimizerStateDict, ParamGroup, ParamGroupInput, ParamState } from '@ddp/nn';
import { Optimizer, refusePendingGradients, refuseStepArguments } from '@ddp/nn';
import { checkBooleanOptions, checkOptionNames, tf } from '@ddp/tensor';
import { ZeroError } from './errors.js';
import { GradientSharder } from './gradient-shard.js';
import { ParameterExchange } from './parameter-exchange.js';
import { type Partition, partitionParameters } from './partition.js';
import {
  afterLoadedEntry,
  checkSameParameters,
  parameterChecksums,
  refuseSplitParameters,
  withLoadedEntry,
  zeroDiffers,
} from './same-parameters.js';
import { gatherStateDict, shardStateDict } from './state-dict.js';

/** An optimizer class of @ddp/nn (SGD, Adam, AdamW, or your own Optimizer subclass). */
export type OptimizerClass<O extends { lr: number }> = new (
  params: ParamGroupInput<O>[],
  options: Partial<O>,
) => Optimizer<O>;

export interface ZeroOptions {
  /** Default: the world group. */
  processGroup?: ProcessGroup | null;
  /** 1: shard optimizer state (default); 2: also shard gradients (see GradientSharder). */
  stage?: 1 | 2;
  /** true: updated parameters travel as one all-gather of a flat buffer per rank's shard (padded to the
   * largest shard); false (default): one broadcast per rank of its shard. */
  parametersAsBucketView?: boolean;
}

/**
 * PyTorch's ZeroRedundancyOptimizer (ZeRO-DP stages 1 and 2). Parameters are partitioned
 * across the ranks by the sorted-greedy rule; each rank keeps the wrapped optimizer's state
 * for its own shard only (about 1/N of it), steps that shard, and the updated values reach
 * every rank. `paramGroups` are the global groups: change hyperparameters (or run an LR
 * scheduler) there, they are copied to the local optimizer before each step.
 *
 * Stage 1 expects gradients already averaged across ranks (DDP). Stage 2 averages them
 * itself, each to its owner only: use it on the bare module, not inside DDP.
 */
export class ZeroRedundancyOptimizer<O extends { lr: number }> extends Optimizer<O> implements Joinable {
  readonly processGroup: ProcessGroup;
  readonly stage: 1 | 2;
  readonly parametersAsBucketView: boolean;
  readonly partition: Partition;
  /** The wrapped optimizer over this rank's shard; null when the rank owns no parameter. */
  readonly optim: Optimizer<O> | null;
  /** Global group index of each of the local optimizer's groups. */
  private readonly localGroupOf: number[] = [];
  private readonly sharder: GradientSharder | null = null;
  /** Sends this rank's stepped shard and receives the others' after each step. */
  private readonly exchange: ParameterExchange;
  private notified = false;
  /** Whether the first step has checked that every rank starts from the same parameters. */
  private checkedParameters = false;
  /** The checkpoint entry loadShardedCheckpoint last loaded, compared across the ranks at the next step. */
  private loadedEntry: LoadedSave | null = null;
  private consolidated: { state: OptimizerStateDict<O>; owned: tf.Tensor[] } | null = null;
  /** The wrapped optimizer's class: what its state dicts are of. */
  private readonly wrappedKind: string;

  constructor(
    params: Tensor[] | ParamGroupInput<O>[],
    optimizerClass: OptimizerClass<O>,
    options: Partial<O> = {},
    zero: ZeroOptions = {},
  ) {
    const known = ['processGroup', 'stage', 'parametersAsBucketView'];
    checkOptionNames('ZeroRedundancyOptimizer', zero, known, (m) => new ZeroError(m));
    checkBooleanOptions('ZeroRedundancyOptimizer', zero, ['parametersAsBucketView'], (m) => new ZeroError(m));
    super(params, options as O);
    this.processGroup = groupOrWorld(zero.processGroup, 'ZeroRedundancyOptimizer');
    refuseSplitParameters(
      this.paramGroups.flatMap((g) => g.params),
      this.processGroup,
    );
    this.stage = zero.stage ?? 1;
    if (this.stage !== 1 && this.stage !== 2) throw new ZeroError(`stage must be 1 or 2, got ${String(this.stage)}`);
    this.parametersAsBucketView = zero.parametersAsBucketView ?? false;
    // the wrapped optimizer's defaults complete the groups (a probe that never steps); holding every group,
    // it checks every group's values on every rank (not only on the ranks owning a bad group's parameters)
    const probeOf = (g: ParamGroup<O>) => ({ ...hyperparameters(g), params: [g.params[0]] }) as ParamGroupInput<O>;
    const probe = new optimizerClass(this.paramGroups.filter((g) => g.params.length > 0).map(probeOf), options);
    this.wrappedKind = probe.stateKind();
    this.adoptGroupCheck(probe);
    Object.assign(this.defaults, probe.defaults);
    for (let g = 0; g < this.paramGroups.length; g++)
      this.paramGroups[g] = { ...probe.defaults, ...this.paramGroups[g] };
    this.partition = partitionParameters(
      this.paramGroups.map((g) => g.params),
      this.processGroup.size,
    );
    const localGroups: ParamGroupInput<O>[] = [];
    this.partition.byRank[this.processGroup.rank].forEach((owned, g) => {
      if (owned.length === 0) return;
      this.localGroupOf.push(g);
      localGroups.push({ ...hyperparameters(this.paramGroups[g]), params: owned } as ParamGroupInput<O>);
    });
    this.optim = localGroups.length > 0 ? new optimizerClass(localGroups, options) : null;
    this.exchange = new ParameterExchange(this.partition, this.processGroup, this.parametersAsBucketView);
    if (this.stage === 2) {
      this.sharder = new GradientSharder(this.allParams(), this.partition.owner, this.processGroup, () =>
        this.notifyOnce(),
      );
    }
  }

  /** Refused once constructed: partition, local optimizer and hooks are built once (an added group never stepped). */
  override addParamGroup(group: ParamGroupInput<O>): void {
    if (this.partition !== undefined)
      throw new ZeroError(
        'addParamGroup: ZeroRedundancyOptimizer cannot take a param group after construction; pass every group ' +
          'to its constructor',
      );
    super.addParamGroup(group);
  }

  get joinProcessGroup(): ProcessGroup {
    return this.processGroup;
  }

  /** What the join loop writes: join marks them while it runs, so a save meanwhile is refused. */
  get joinWrites(): readonly Tensor[] {
    return this.allParams();
  }

  /** The parameters this rank updates. */
  get ownedParams(): Tensor[] {
    return this.partition.byRank[this.processGroup.rank].flat();
  }

  /**
   * Steps this rank's shard with the wrapped optimizer, then sends every shard to every rank.
   * All ranks must call it (it is collective).
   */
  override async step(...args: []): Promise<void> {
    refuseStepArguments('ZeroRedundancyOptimizer', args); // before any collective: on every rank alike
    this.checkGroupsAtStep(); // every group on every rank, not only where a rank owns its parameters
    refusePendingGradients('ZeroRedundancyOptimizer.step()', this.allParams());
    this.stepCount++;
    // not awaited, zeroGrad cleared the gradients before the local step read them (probe X)
    return whileWriting(this.allParams(), 'ZeroRedundancyOptimizer.step()', 'values', () => this.stepNow());
  }

  private async stepNow(): Promise<void> {
    this.sharder?.checkHooked();
    this.disposeConsolidated(); // stale from here on: stateDict() must not save it with newer weights
    const notified = this.notifyOnce();
    for (const [i, g] of this.localGroupOf.entries())
      Object.assign(this.optim!.paramGroups[i], hyperparameters(this.paramGroups[g]));
    if (!this.checkedParameters) {
      const checksums = withLoadedEntry(this.loadedEntry, parameterChecksums(this.allParams()));
      await notified; // the join notification is the iteration's first collective
      // before any change: a refused step changes nothing
      const differs = afterLoadedEntry(this.loadedEntry, zeroDiffers(this.allParams()), ZeroError);
      await checkSameParameters(checksums, this.processGroup, differs);
      this.checkedParameters = true;
      this.loadedEntry = null;
    }
    if (this.sharder) {
      await notified; // sent in backward, before the gradient reduces
      await this.sharder.checkSameOrder(); // before any change, as the check above
    }
    this.optim?.step();
    await notified;
    await this.exchange.run();
    this.notified = false;
    this.sharder?.endIteration();
  }

  /**
   * Ends the iteration without stepping (GradScaler calls it for a skipped step, on every rank):
   * the next backward starts a new iteration (join notification, stage 2's gradient reduces).
   */
  skipStep(): void {
    this.notified = false;
    this.sharder?.endIteration();
  }

  override zeroGrad(setToNone = true): void {
    super.zeroGrad(setToNone);
    this.sharder?.gradientsCleared();
  }

  protected update(): never {
    throw new ZeroError('ZeroRedundancyOptimizer steps through its wrapped optimizer');
  }

  /** A Joinable's per-iteration notification, once per iteration (in backward for stage 2). */
  private notifyOnce(): Promise<unknown> {
    if (this.notified) return Promise.resolve();
    this.notified = true;
    const notice = notifyJoinContext(this);
    // a failed iteration (EarlyTerminationError, JoinShadowError) is over: the next one notifies again (it
    // sent its reduces without a notice, which met the other ranks' notices: every later step failed, probe DB)
    notice.catch(() => {
      this.notified = false;
    });
    return notice;
  }

  /**
   * Gathers every rank's shard of the optimizer state on rank `to` (a group rank), where
   * `stateDict()` then returns the whole state in torch.optim's layout (as if one optimizer
   * held every parameter), e.g. for `saveCheckpoint`. Collective: every rank calls it.
   */
  async consolidateStateDict(to = 0): Promise<void> {
    this.disposeConsolidated();
    const index = this.globalIndex();
    const entries: [number, ParamState][] = this.optim ? [...this.optim.state].map(([p, s]) => [index.get(p)!, s]) : [];
    const state = await gatherStateDict(this.processGroup, entries, to);
    if (state === null) return;
    const paramGroups = this.paramGroups.map(({ params, ...hyper }) => ({
      ...(hyper as unknown as O),
      params: params.map((p) => index.get(p)!),
    }));
    const owned = [...state.values()].flatMap((s) =>
      Object.values(s).filter((v): v is tf.Tensor => v instanceof tf.Tensor),
    );
    this.consolidated = { state: { state, paramGroups, kind: this.stateKind() }, owned };
  }

  override stateKind(): string {
    return this.wrappedKind;
  }

  /** The consolidated state (borrowed), on the rank `consolidateStateDict` gathered it on. */
  override stateDict(): OptimizerStateDict<O> {
    if (!this.consolidated) {
      throw new ZeroError(
        `rank ${this.processGroup.ranks[this.processGroup.rank]}: no consolidated state; call ` +
          `consolidateStateDict(to) on every rank, then stateDict() on rank \`to\``,
      );
    }
    return this.consolidated.state;
  }

  /** A sharded checkpoint's entry was loaded: the next step compares it and the parameters across the ranks. */
  noteLoadedEntry(entry: LoadedSave): void {
    this.loadedEntry = entry;
    this.checkedParameters = false;
  }

  /** Loads a whole (consolidated) state dict on every rank; each keeps its own shard's state. */
  override loadStateDict(sd: OptimizerStateDict<O>): void {
    const local = shardStateDict(sd, this.paramGroups, this.optim, this.localGroupOf, this.stateKind());
    this.checkLoadedValues(sd); // as the wrapped optimizer checks them, on every rank (one owning none too)
    this.disposeConsolidated();
    this.assignLoadedHyperparameters(sd);
    if (local) this.optim!.loadStateDict(local);
  }

  /** A joined rank still steps its shard and sends it (stage 2: after replaying the gradient reduces). */
  joinHook(opts: JoinHookOptions): JoinHook {
    if (!this.sharder) return { mainHook: () => this.step(), postHook: () => {} };
    const why = `rank ${this.processGroup.ranks[this.processGroup.rank]}: stage 2 averages gradients over the`;
    const unsupported = `${why} initial world size; divideByInitialWorldSize: false is not supported`;
    const refusal = opts.divideByInitialWorldSize === false ? new ZeroError(unsupported) : null;
    return this.sharder.joinHook(() => this.step(), refusal);
  }

  override dispose(): void {
    this.sharder?.remove();
    this.optim?.dispose();
    this.disposeConsolidated();
  }

  private disposeConsolidated(): void {
    if (this.consolidated) tf.dispose(this.consolidated.owned);
    this.consolidated = null;
  }

  private allParams(): Tensor[] {
    return this.paramGroups.flatMap((g) => g.params);
  }

  private globalIndex(): Map<Tensor, number> {
    return new Map(this.allParams().map((p, i) => [p, i]));
  }
}

const hyperparameters = <O>({ params: _params, ...hyper }: ParamGroup<O>): Omit<ParamGroup<O>, 'params'> => hyper;

/** Bytes held by an optimizer's state tensors (moments, momentum buffers). */
export function optimizerStateBytes(optimizer: Optimizer<{ lr: number }> | null): number {
  let bytes = 0;
  for (const s of optimizer?.state.values() ?? [])
    for (const v of Object.values(s)) if (v instanceof tf.Tensor) bytes += v.size * 4;
  return bytes;
}

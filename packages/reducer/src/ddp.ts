import { isGradEnabled, pendingWriter, queueCallback, type RemovableHandle } from '@ddp/autograd';
import { groupOrWorld, type ProcessGroup, ReduceOp } from '@ddp/comm';
import { isJoinActive, type Joinable, type JoinHook, type JoinHookOptions, notifyJoinContext } from '@ddp/join';
import type { Module, Parameter } from '@ddp/nn';
import type { BucketCapTuning } from './autotune.js';
import { BucketPlan } from './bucket-plan.js';
import { BufferSync } from './buffer-sync.js';
import { commGroupFor, holdCommGroup, releaseCommGroup } from './comm-group.js';
import { allreduceHook, type CommHook, type InPlaceCommHook, isInPlaceHook } from './comm-hooks.js';
import { DDPCommError, DDPUsageError, markedReadyTwice } from './errors.js';
import { writeBackAgreed } from './finite-agreement.js';
import { DDPJoinHook, IterationNotice, joinStatus } from './join-hook.js';
import { ModuleDelegates } from './module-delegates.js';
import { checkOptions, type DDPOptions } from './options.js';
import { claimParameters, releaseParameters } from './ownership.js';
import { admitPowerSGDState } from './powersgd-warnings.js';
import { newReduction, type Reduction } from './reduction.js';
import { broadcastTensors, checkModule, checkTrainableUnchanged, moduleState, syncInitialState } from './sync.js';
import { raiseUnused, unreachedParameters, whenResolved } from './unused.js';

/**
 * PyTorch's DistributedDataParallel: gradients are averaged across ranks during backward,
 * bucket by bucket, each bucket's all-reduce running on the comm thread while backward
 * computes the next gradients. Build with `await DistributedDataParallel.create(module)`.
 */
export class DistributedDataParallel<M extends Module = Module> extends ModuleDelegates<M> implements Joinable {
  readonly processGroup: ProcessGroup;
  /** Where this wrapper's collectives run: processGroup, or its duplicate beside another wrapper (comm-group.ts). */
  private readonly comm: ProcessGroup;
  readonly findUnusedParameters: boolean;
  readonly broadcastBuffers: boolean;
  readonly checkFinite: boolean;
  /** Completed synchronized backwards. */
  iteration = 0;
  /** Parameters requiring grad, in registration order. */
  readonly params: readonly { name: string; param: Parameter }[];
  private readonly hooked: ReadonlySet<Parameter>;
  private readonly hooks: readonly RemovableHandle[];
  private readonly plan: BucketPlan;
  private hook: CommHook<unknown> | InPlaceCommHook<unknown> = allreduceHook;
  private hookState: unknown = null;
  private requireSync = true;
  private reduction: Reduction | null = null;
  /** The join context's per-iteration notification, issued by forward. */
  private joinNotice: IterationNotice | null = null;
  /** Whether the iteration runs under join, on a joined rank too (isJoinActive is false there): errors say so. */
  private underJoin = false;
  private readonly bufferSync: BufferSync;
  /** Parameters the last forward's graph does not reach (findUnusedParameters). */
  private unusedAtForward: number[] = [];
  /** Set by joinHook on ranks that joined; travels to the active ranks in the join all-reduce. */
  divideByInitialWorldSize = true;

  private constructor(
    readonly module: M,
    opts: DDPOptions,
    [group, comm]: [ProcessGroup, ProcessGroup],
  ) {
    super();
    [this.processGroup, this.comm] = [group, comm];
    holdCommGroup(this, group);
    this.findUnusedParameters = opts.findUnusedParameters ?? false;
    this.broadcastBuffers = opts.broadcastBuffers ?? true;
    this.checkFinite = opts.checkFinite ?? true;
    this.bufferSync = new BufferSync(module, this.comm, this.broadcastBuffers);
    this.params = module
      .namedParameters()
      .filter(([, p]) => p.requiresGrad)
      .map(([name, param]) => ({ name, param }));
    this.hooked = new Set(this.params.map(({ param }) => param));
    this.plan = new BucketPlan(this.params, opts, this.processGroup.size);
    claimParameters(this, this.params, `DistributedDataParallel.create (rank ${this.processGroup.rank})`);
    this.hooks = this.params.map(({ param }, i) => param.registerPostAccumulateGradHook(() => this.markReady(i)));
  }

  /**
   * Removes this wrapper's gradient hooks and gives its parameters back, so the module can be
   * wrapped again (after freezing or unfreezing, or in a new process group). Not collective.
   */
  dispose(): void {
    for (const hook of this.hooks) hook.remove();
    releaseParameters(this, this.params);
    releaseCommGroup(this, this.processGroup, this.comm);
  }

  /** Checks shapes agree across ranks, then copies rank 0's parameters and buffers everywhere. */
  static async create<M extends Module>(module: M, opts: DDPOptions = {}): Promise<DistributedDataParallel<M>> {
    checkModule(module, 'DistributedDataParallel.create', { trainable: true });
    checkOptions(opts);
    const group = groupOrWorld(opts.processGroup, 'DistributedDataParallel.create');
    const groups: [ProcessGroup, ProcessGroup] = [group, await commGroupFor(group)];
    let ddp: DistributedDataParallel<M> | undefined;
    try {
      ddp = new DistributedDataParallel(module, opts, groups);
      await syncInitialState(module, groups[1], 'DistributedDataParallel');
    } catch (error) {
      ddp ? ddp.dispose() : releaseCommGroup(null, ...groups); // a failed create holds nothing
      throw error;
    }
    return ddp;
  }

  get joinProcessGroup(): ProcessGroup {
    return this.processGroup;
  }

  /** What the join loop writes: join marks them while it runs, so a save or forward meanwhile is refused. */
  get joinWrites(): readonly Parameter[] {
    return this.params.map(({ param }) => param);
  }

  /** The buckets' parameter names, in bucket order (for inspection and tests). */
  get bucketLayout(): string[][] {
    return this.plan.layout;
  }

  /** The cap of every bucket but the first, in MiB: the one given, or the one the autotune is trying or kept. */
  get bucketCapMB(): number {
    return this.plan.capMB;
  }

  /** What the autotune measured and kept, once it is done (null while tuning, or without it). */
  get bucketCapTuning(): BucketCapTuning | null {
    return this.plan.tuning;
  }

  /** module.forward plus DDP's per-iteration bookkeeping (join notification, unused-parameter search). */
  forward(...args: Parameters<M['forward']>): ReturnType<M['forward']> {
    const writer = this.reduction ? 'loss.backward()' : this.params.map((p) => pendingWriter(p.param)).find(Boolean);
    if (writer)
      throw new DDPUsageError(
        `rank ${this.rank}: forward while ${writer} is still running (not awaited); await ${writer} first`,
      );
    checkTrainableUnchanged(this.module, this.hooked, 'DistributedDataParallel', this.processGroup.rank);
    this.underJoin = isJoinActive(this);
    if (isJoinActive(this)) {
      // the buckets go out once it settles; awaited at the end of backward: raises EarlyTerminationError
      this.joinNotice = IterationNotice.replacing(this.joinNotice, notifyJoinContext(this), this.params);
    }
    this.bufferSync.beforeForward(this.requireSync, this.rank);
    const out = (this.module.forward as (...a: unknown[]) => unknown)(...args);
    if (!(this.findUnusedParameters && this.requireSync && isGradEnabled())) return out as ReturnType<M['forward']>;
    return whenResolved(out, (resolved) => {
      this.unusedAtForward = unreachedParameters(resolved, this.params);
    }) as ReturnType<M['forward']>;
  }

  /** Broadcasts rank 0's buffers (collective), as a synchronized backward does: see buffer-sync.ts. */
  async syncBuffers(): Promise<void> {
    await this.collective('buffer broadcast', () => this.bufferSync.sync(0));
  }

  /** Runs fn without gradient synchronization; the next synchronized backward reduces the accumulated sum. */
  async noSync<T>(fn: () => Promise<T> | T): Promise<T> {
    // a joined rank shadows one synchronized backward per iteration of the others: it cannot skip one
    if (isJoinActive(this))
      throw new DDPUsageError(`rank ${this.rank}: noSync inside join: under join every backward must synchronize`);
    const before = this.requireSync;
    this.requireSync = false;
    try {
      return await fn();
    } finally {
      this.requireSync = before;
    }
  }

  /** Replaces how buckets are communicated (PyTorch's register_comm_hook). Call before the first backward. */
  registerCommHook<S>(state: S, hook: CommHook<S>): void;
  registerCommHook<S>(state: S, hook: InPlaceCommHook<S> | CommHook<S>): void;
  registerCommHook<S>(state: S, hook: CommHook<S> | InPlaceCommHook<S>): void {
    if (this.iteration > 0 || this.reduction !== null)
      throw new DDPUsageError('registerCommHook must be called before the first backward');
    admitPowerSGDState(state, this, this.module);
    this.hook = hook as CommHook<unknown> | InPlaceCommHook<unknown>;
    this.hookState = state;
  }

  joinHook(opts: JoinHookOptions = {}): JoinHook {
    this.divideByInitialWorldSize = opts.divideByInitialWorldSize ?? true;
    return new DDPJoinHook(this);
  }

  /** A parameter's gradient is final for this backward: into its bucket; launch the buckets now full, in order. */
  private markReady(index: number): void {
    if (!this.requireSync) return;
    const reduction = this.reduction ?? this.startReduction();
    if (reduction.ready[index]) throw markedReadyTwice(this.params[index].name);
    this.place(index, true);
  }

  private startReduction(): Reduction {
    const reduction = newReduction(this.params.length, 0);
    this.reduction = reduction;
    for (const b of this.plan.buckets) b.reset();
    queueCallback(() => this.finishReduction(reduction));
    for (const i of this.unusedAtForward) this.place(i, false);
    this.unusedAtForward = [];
    return reduction;
  }

  /** Puts a parameter's gradient (zeros if none) into its bucket slot; launches the buckets now full, in order. */
  private place(index: number, withGradient: boolean): void {
    const reduction = this.reduction!;
    reduction.ready[index] = 1;
    if (withGradient) this.plan.noteReady(index);
    const { buckets, slotOf } = this.plan;
    const { bucket, slot } = slotOf[index];
    // unreached, it may hold a gradient accumulated under noSync: still this rank's share (as torch's)
    const grad = slot.param.grad ?? null;
    if (grad !== null) reduction.used[index] = 1;
    bucket.place(slot, grad);
    // under join, after the iteration's notice: when it raises EarlyTerminationError no bucket has
    // gone out, so the group stays usable (buckets sent first left it with mismatched collectives)
    const launch = () => {
      while (reduction.nextBucket < buckets.length && buckets[reduction.nextBucket].full) {
        const next = buckets[reduction.nextBucket++];
        next.launch(this.hook, this.hookState, this.comm, reduction.claimed, this.checkFinite);
      }
    };
    if (this.joinNotice) this.joinNotice.sent.then(launch, () => {});
    else launch();
  }

  private get rank(): number {
    return this.processGroup.ranks[this.processGroup.rank];
  }

  /** The end-of-backward callback: every bucket reduced, averaged gradients written back. */
  private async finishReduction(reduction: Reduction): Promise<void> {
    try {
      const unready = this.params.flatMap((_, i) => (reduction.ready[i] ? [] : [i]));
      const { params, comm, iteration } = this;
      if (unready.length > 0 && !this.findUnusedParameters) await raiseUnused(params, unready, comm, iteration);
      for (const i of unready) this.place(i, false);
      await this.joinNotice?.settle();
      await this.completeIteration(reduction, true);
    } finally {
      this.reduction = null;
      this.joinNotice?.release(); // its clones, when raiseUnused threw before it settled
      this.joinNotice = null; // also when raiseUnused threw: a stale notice held later launches
    }
  }

  /**
   * What every rank does once its buckets are launched; a joined rank runs it too (with
   * zero gradients, `active` false) so the collectives match: await the buckets, agree on
   * the divisor (join) and on which parameters any rank used (findUnusedParameters), write
   * the averages back, rebuild the buckets after the first iteration, tune their cap, sync buffers.
   */
  private async completeIteration(reduction: Reduction, active: boolean): Promise<void> {
    const { buckets } = this.plan;
    const results: (Float32Array | null)[] = [];
    this.underJoin = !active || isJoinActive(this);
    for (const b of buckets) results.push(await b.reduced(this.rank, this.iteration, buckets.length, this.underJoin));
    const withHook = this.hook !== allreduceHook;
    const { scale, buffersFrom } =
      !active || isJoinActive(this)
        ? await joinStatus(active, this.divideByInitialWorldSize, this.comm, this.collective, withHook)
        : { scale: 1, buffersFrom: 0 };
    let usedAnywhere: Int32Array | null = null;
    if (this.findUnusedParameters) {
      usedAnywhere = Int32Array.from(reduction.used);
      if (this.comm.size > 1)
        await this.collective('used-parameter all-reduce', () => this.comm.allReduce(usedAnywhere!).wait());
    }
    // joined ranks get the averages too: a Joinable optimizer (ZeRO) still steps its shard with them
    const opts = { scale, usedAnywhere, checkFinite: this.checkFinite, iteration: this.iteration };
    const flagGroup = isInPlaceHook(this.hook) ? this.comm : null;
    await writeBackAgreed(buckets, results, opts, flagGroup, this.collective);
    await this.plan.afterIteration(performance.now() - reduction.startedAt, this.comm, this.collective);
    // from rank 0, or under join the highest rank still training (torch's)
    await this.collective('buffer broadcast', () => this.bufferSync.sync(buffersFrom));
    this.iteration++;
  }

  /** Runs one collective; its failure becomes a DDPCommError naming the rank, the collective and the iteration. */
  private readonly collective = async <T>(what: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (e) {
      throw new DDPCommError(this.rank, what, this.iteration, e, this.underJoin);
    }
  };

  /** A joined rank's share of one iteration of the active ranks (the JoinHook's mainHook). */
  async shadowIteration(): Promise<void> {
    const reduction = newReduction(this.params.length, this.plan.buckets.length);
    for (const bucket of this.plan.buckets)
      bucket.placeZeros().launch(this.hook, this.hookState, this.comm, reduction.claimed, this.checkFinite);
    await this.completeIteration(reduction, false);
  }

  /** After join: every rank takes the model of the last rank to join (the JoinHook's postHook). */
  async syncFinalModel(isLastJoiner: boolean): Promise<void> {
    const src = Int32Array.of(isLastJoiner ? this.comm.rank : -1);
    this.underJoin = true;
    await this.collective('last-joiner search', () => this.comm.allReduce(src, { op: ReduceOp.MAX }).wait());
    await this.collective('final model broadcast', () => broadcastTensors(moduleState(this.module), this.comm, src[0]));
  }
}

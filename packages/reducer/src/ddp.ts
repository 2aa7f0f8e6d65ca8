import { type ProcessGroup, getDefaultGroup, ReduceOp } from '@ddp/comm';
import { AccumulateGrad, type Node, queueCallback, Tensor, isGradEnabled } from '@ddp/autograd';
import { isJoinActive, type JoinHook, type JoinHookOptions, type Joinable, notifyJoinContext } from '@ddp/join';
import type { Module, Parameter } from '@ddp/nn';
import { copyTensorInto, tensorFromFloat32, type tf } from '@ddp/tensor';
import { type Bucket, type BucketSlot, buildBuckets } from './bucket.js';
import { allreduceHook, type CommHook, type GradBucket } from './comm-hooks.js';
import { DDPCommError, DDPUsageError, NonFiniteGradientError, UnusedParametersError } from './errors.js';
import { DDPJoinHook } from './join-hook.js';
import { broadcastTensors, buffersOf, moduleState, verifyParameterShapes } from './sync.js';

export interface DDPOptions {
  /** Defaults to the world group. */
  processGroup?: ProcessGroup;
  /** Size of every bucket but the first, in MiB (default 25). */
  bucketCapMB?: number;
  /** Size of the first bucket, in MiB (default 1): small, so the first all-reduce starts early. */
  firstBucketMB?: number;
  /** Parameters that get no gradient are reduced as zeros instead of raising (default false). */
  findUnusedParameters?: boolean;
  /** Broadcast rank 0's buffers so every forward starts from them (default true). */
  broadcastBuffers?: boolean;
  /** Raise NonFiniteGradientError naming the parameter when an averaged gradient holds NaN/Inf (default true; one pass over the averages, which writeBack reads anyway). */
  checkFinite?: boolean;
}

interface Reduction {
  nextBucket: number;
  works: Promise<Float32Array>[];
  /** Marked ready in this backward (with a gradient or as zeros). */
  ready: Uint8Array;
  /** Got a gradient on this rank in this backward. */
  used: Uint8Array;
}

const MB = 1024 * 1024;

/** Every Tensor in a forward's output (arrays and plain objects searched). */
function outputTensors(out: unknown, found: Tensor[] = []): Tensor[] {
  if (out instanceof Tensor) found.push(out);
  else if (Array.isArray(out)) for (const o of out) outputTensors(o, found);
  else if (out !== null && typeof out === 'object') for (const o of Object.values(out)) outputTensors(o, found);
  return found;
}

function scaleInPlace(values: Float32Array, scale: number): void {
  for (let i = 0; i < values.length; i++) values[i]! *= scale;
}

/**
 * Index of the first NaN or ±Inf, or -1. A branch-free pass over the bits first (an all-ones
 * exponent plus one exponent step sets the sign bit), the search only when it finds one.
 */
function firstNonFinite(values: Float32Array): number {
  const bits = new Int32Array(values.buffer, values.byteOffset, values.length);
  const n = bits.length;
  let probe = 0;
  for (let i = 0; i < n; i++) probe |= (bits[i]! & 0x7f800000) + 0x00800000;
  return probe >= 0 ? -1 : values.findIndex((v) => !Number.isFinite(v));
}

/**
 * PyTorch's DistributedDataParallel: gradients are averaged across ranks during backward,
 * bucket by bucket, each bucket's all-reduce running on the comm thread while backward
 * computes the next gradients. Build with `await DistributedDataParallel.create(module)`.
 */
export class DistributedDataParallel<M extends Module = Module> implements Joinable {
  readonly processGroup: ProcessGroup;
  readonly findUnusedParameters: boolean;
  readonly broadcastBuffers: boolean;
  readonly checkFinite: boolean;
  /** Completed synchronized backwards. */
  iteration = 0;
  /** Parameters requiring grad, in registration order. */
  readonly params: readonly { name: string; param: Parameter }[];
  private buckets: Bucket[] = [];
  /** For each parameter, its bucket and slot. */
  private slotOf: { bucket: Bucket; slot: BucketSlot }[] = [];
  private hook: CommHook<unknown> = allreduceHook;
  private hookState: unknown = null;
  private requireSync = true;
  private reduction: Reduction | null = null;
  /** Order in which gradients became ready in the first synchronized backward. */
  private readyOrder: number[] = [];
  private bucketsRebuilt = false;
  /** The join context's per-iteration notification, issued by forward. */
  private joinNotice: Promise<unknown> | null = null;
  /** Parameters the last forward's graph does not reach (findUnusedParameters). */
  private unusedAtForward: number[] = [];
  /** Set by joinHook on ranks that joined; travels to the active ranks in the join all-reduce. */
  divideByInitialWorldSize = true;
  private readonly firstCapBytes: number;
  private readonly capBytes: number;

  private constructor(
    readonly module: M,
    opts: DDPOptions,
  ) {
    this.processGroup = opts.processGroup ?? getDefaultGroup();
    this.findUnusedParameters = opts.findUnusedParameters ?? false;
    this.broadcastBuffers = opts.broadcastBuffers ?? true;
    this.checkFinite = opts.checkFinite ?? true;
    this.firstCapBytes = (opts.firstBucketMB ?? 1) * MB;
    this.capBytes = (opts.bucketCapMB ?? 25) * MB;
    this.params = module.namedParameters().filter(([, p]) => p.requiresGrad).map(([name, param]) => ({ name, param }));
    const reverse = this.params.map((_, i) => this.params.length - 1 - i);
    this.setBuckets(reverse);
    this.params.forEach(({ param }, i) => {
      param.registerPostAccumulateGradHook(() => this.markReady(i));
    });
  }

  /** Checks shapes agree across ranks, then copies rank 0's parameters and buffers everywhere. */
  static async create<M extends Module>(module: M, opts: DDPOptions = {}): Promise<DistributedDataParallel<M>> {
    for (const key of ['bucketCapMB', 'firstBucketMB'] as const) {
      const v = opts[key];
      if (v !== undefined && !(Number.isFinite(v) && v > 0)) throw new DDPUsageError(`DistributedDataParallel.create: ${key} must be a positive number of MiB, got ${v}`);
    }
    if (!module.namedParameters().some(([, p]) => p.requiresGrad)) {
      throw new DDPUsageError('DistributedDataParallel.create: the module has no parameter that requires grad; there is nothing to synchronise');
    }
    const ddp = new DistributedDataParallel(module, opts);
    await verifyParameterShapes(module.namedParameters(), ddp.processGroup);
    await broadcastTensors(moduleState(module, ddp.broadcastBuffers), ddp.processGroup, 0);
    return ddp;
  }

  get joinProcessGroup(): ProcessGroup {
    return this.processGroup;
  }

  /** The buckets' parameter names, in bucket order (for inspection and tests). */
  get bucketLayout(): string[][] {
    return this.buckets.map((b) => b.slots.map((s) => s.name));
  }

  /** module.forward plus DDP's per-iteration bookkeeping (join notification, unused-parameter search). */
  forward(...args: Parameters<M['forward']>): ReturnType<M['forward']> {
    if (this.reduction !== null) throw new DDPUsageError('DistributedDataParallel.forward called while the previous backward is still reducing gradients; await loss.backward() first');
    if (isJoinActive(this)) {
      // awaited at the end of backward, before the buckets: it raises EarlyTerminationError there (throwOnEarlyTermination)
      this.joinNotice?.catch(() => {});
      this.joinNotice = notifyJoinContext(this);
    }
    const out = (this.module.forward as (...a: unknown[]) => unknown)(...args) as ReturnType<M['forward']>;
    if (this.findUnusedParameters && this.requireSync && isGradEnabled()) this.unusedAtForward = this.unreachedParameters(outputTensors(out));
    return out;
  }

  /** Runs fn without gradient synchronization; the next synchronized backward reduces the accumulated sum. */
  async noSync<T>(fn: () => Promise<T> | T): Promise<T> {
    const before = this.requireSync;
    this.requireSync = false;
    try {
      return await fn();
    } finally {
      this.requireSync = before;
    }
  }

  /** Replaces how buckets are communicated (PyTorch's register_comm_hook). Call before the first backward. */
  registerCommHook<S>(state: S, hook: CommHook<S>): void {
    if (this.iteration > 0 || this.reduction !== null) throw new DDPUsageError('registerCommHook must be called before the first backward');
    this.hook = hook as CommHook<unknown>;
    this.hookState = state;
  }

  joinHook(opts: JoinHookOptions = {}): JoinHook {
    this.divideByInitialWorldSize = opts.divideByInitialWorldSize ?? true;
    return new DDPJoinHook(this);
  }

  /** Parameters no graph edge from the outputs reaches. */
  private unreachedParameters(outputs: Tensor[]): number[] {
    const seen = new Set<Node>();
    const reached = new Set<Tensor>();
    const stack: Node[] = outputs.flatMap((t) => (t.gradFn ? [t.gradFn] : t.isLeaf && t.requiresGrad ? [t.gradAccumulator()] : []));
    while (stack.length > 0) {
      const node = stack.pop()!;
      if (seen.has(node)) continue;
      seen.add(node);
      if (node instanceof AccumulateGrad) reached.add(node.variable);
      for (const edge of node.next) if (edge) stack.push(edge.node);
    }
    return this.params.flatMap(({ param }, i) => (reached.has(param) ? [] : [i]));
  }

  /** A parameter's gradient is final for this backward: copy it into its bucket; launch full buckets in order. */
  private markReady(index: number): void {
    if (!this.requireSync) return;
    const reduction = this.reduction ?? this.startReduction();
    if (reduction.ready[index]) {
      throw new DDPUsageError(`parameter "${this.params[index]!.name}" was marked ready twice in one backward (used in a checkpointed segment and outside it, or by two backward calls without an optimizer step)`);
    }
    this.place(index, this.params[index]!.param.grad);
  }

  private startReduction(): Reduction {
    const reduction = this.newReduction();
    this.reduction = reduction;
    for (const b of this.buckets) b.pending = b.slots.length;
    queueCallback(() => this.finishReduction(reduction));
    for (const i of this.unusedAtForward) this.place(i, null);
    this.unusedAtForward = [];
    return reduction;
  }

  /** Copies a gradient (null: zeros) into its bucket slot and launches the buckets now complete. */
  private place(index: number, grad: tf.Tensor | null): void {
    const reduction = this.reduction!;
    reduction.ready[index] = 1;
    if (grad !== null) {
      reduction.used[index] = 1;
      if (!this.bucketsRebuilt) this.readyOrder.push(index);
    }
    const { bucket, slot } = this.slotOf[index]!;
    if (grad === null) bucket.buffer.fill(0, slot.offset, slot.offset + slot.size);
    else copyTensorInto(grad, bucket.buffer, slot.offset);
    bucket.pending--;
    while (reduction.nextBucket < this.buckets.length && this.buckets[reduction.nextBucket]!.pending === 0) {
      this.launch(this.buckets[reduction.nextBucket++]!, reduction);
    }
  }

  private launch(bucket: Bucket, reduction: Reduction): void {
    const gb: GradBucket = { index: bucket.index, buffer: bucket.buffer, parameters: bucket.slots, isLast: bucket.index === this.buckets.length - 1, processGroup: this.processGroup };
    let work: Promise<Float32Array>;
    try {
      work = this.hook(this.hookState, gb);
    } catch (e) {
      work = Promise.reject(e);
    }
    work.catch(() => {});
    reduction.works[bucket.index] = work;
  }

  private newReduction(): Reduction {
    const n = this.params.length;
    return { nextBucket: 0, works: [], ready: new Uint8Array(n), used: new Uint8Array(n) };
  }

  private setBuckets(order: readonly number[]): void {
    this.buckets = buildBuckets(this.params, order, this.firstCapBytes, this.capBytes);
    this.slotOf = [];
    for (const bucket of this.buckets) for (const slot of bucket.slots) this.slotOf[slot.index] = { bucket, slot };
  }

  private get rank(): number {
    return this.processGroup.ranks[this.processGroup.rank]!;
  }

  /** The end-of-backward callback: every bucket reduced, averaged gradients written back. */
  private async finishReduction(reduction: Reduction): Promise<void> {
    try {
      const unready = this.params.flatMap((_, i) => (reduction.ready[i] ? [] : [i]));
      if (unready.length > 0 && !this.findUnusedParameters) await this.raiseUnused(unready);
      for (const i of unready) this.place(i, null);
      const notice = this.joinNotice;
      this.joinNotice = null;
      await notice;
      await this.completeIteration(reduction, true);
    } finally {
      this.reduction = null;
    }
  }

  /**
   * What every rank does once its buckets are launched; a joined rank runs it too (with
   * zero gradients, `active` false) so the collectives match: await the buckets, agree on
   * the divisor (join) and on which parameters any rank used (findUnusedParameters), write
   * the averages back, rebuild the buckets after the first iteration, sync buffers.
   */
  private async completeIteration(reduction: Reduction, active: boolean): Promise<void> {
    const results: Float32Array[] = [];
    for (let b = 0; b < this.buckets.length; b++) {
      try {
        results.push(await reduction.works[b]!);
      } catch (e) {
        const names = this.buckets[b]!.slots.map((s) => s.name);
        const what = `gradient all-reduce of bucket ${b} of ${this.buckets.length} (${names.slice(0, 3).join(', ')}${names.length > 3 ? ', …' : ''})`;
        throw new DDPCommError(this.rank, what, this.iteration, e);
      }
    }
    let scale = 1;
    if (!active || isJoinActive(this)) {
      // [ranks still active, ranks asking to divide by the active count]
      const status = Int32Array.of(active ? 1 : 0, !active && !this.divideByInitialWorldSize ? 1 : 0);
      await this.collective('join status all-reduce', () => this.processGroup.allReduce(status).wait());
      if (status[1]! > 0 && status[0]! > 0) scale = this.processGroup.size / status[0]!;
    }
    let usedAnywhere: Int32Array | null = null;
    if (this.findUnusedParameters) {
      usedAnywhere = Int32Array.from(reduction.used);
      await this.collective('used-parameter all-reduce', () => this.processGroup.allReduce(usedAnywhere!).wait());
    }
    // joined ranks get the averages too: a Joinable optimizer (ZeRO) still steps its shard with them
    this.writeBack(results, scale, usedAnywhere);
    if (!this.bucketsRebuilt) await this.rebuildBuckets();
    if (this.broadcastBuffers) await this.syncBuffers();
    this.iteration++;
  }

  private async collective(what: string, run: () => Promise<unknown>): Promise<void> {
    try {
      await run();
    } catch (e) {
      throw new DDPCommError(this.rank, what, this.iteration, e);
    }
  }

  /** Averaged gradients into each parameter's grad; globally unused parameters keep theirs. */
  private writeBack(results: Float32Array[], scale: number, usedAnywhere: Int32Array | null): void {
    for (const bucket of this.buckets) {
      const result = results[bucket.index]!;
      if (scale !== 1) scaleInPlace(result, scale);
      const bad = this.checkFinite ? firstNonFinite(result) : -1;
      for (const slot of bucket.slots) {
        if (usedAnywhere !== null && usedAnywhere[slot.index] === 0) continue;
        if (bad >= slot.offset && bad < slot.offset + slot.size) throw new NonFiniteGradientError(slot.name, result[bad]!, this.iteration);
        slot.param.grad = tensorFromFloat32(result.subarray(slot.offset, slot.offset + slot.size), slot.shape);
      }
    }
  }

  /**
   * Without findUnusedParameters, parameters without a gradient stop their bucket (and every
   * later one) from launching. Every rank that sees this all-reduces its unused set and
   * raises UnusedParametersError naming the union. A rank whose buckets all launched is
   * still waiting on one of them, which now meets this all-reduce instead: @ddp/comm
   * reports the mismatch on every rank, so nobody hangs.
   */
  private async raiseUnused(unready: number[]): Promise<never> {
    const flags = new Int32Array(this.params.length);
    for (const i of unready) flags[i] = 1;
    try {
      await this.processGroup.allReduce(flags).wait();
    } catch {
      // peers launched buckets this rank did not: name this rank's own unused parameters
    }
    const names = this.params.flatMap(({ name }, i) => (flags[i]! > 0 ? [name] : []));
    throw new UnusedParametersError(names, this.rank, this.iteration);
  }

  /** After the first iteration: buckets in the order gradients became ready on rank 0, broadcast so every rank agrees. */
  private async rebuildBuckets(): Promise<void> {
    const seen = new Set(this.readyOrder);
    const rest = this.params.map((_, i) => this.params.length - 1 - i).filter((i) => !seen.has(i));
    const order = Int32Array.from([...this.readyOrder, ...rest]);
    await this.collective('bucket order broadcast', () => this.processGroup.broadcast(order, { src: 0 }).wait());
    this.setBuckets([...order]);
    this.bucketsRebuilt = true;
    this.readyOrder = [];
  }

  private async syncBuffers(): Promise<void> {
    const buffers = buffersOf(this.module);
    if (buffers.length > 0) await this.collective('buffer broadcast', () => broadcastTensors(buffers, this.processGroup, 0));
  }

  /** A joined rank's share of one iteration of the active ranks (the JoinHook's mainHook). */
  async shadowIteration(): Promise<void> {
    const reduction = this.newReduction();
    for (const bucket of this.buckets) {
      bucket.buffer.fill(0);
      this.launch(bucket, reduction);
    }
    await this.completeIteration(reduction, false);
  }

  /** After join: every rank takes the model of the last rank to join (the JoinHook's postHook). */
  async syncFinalModel(isLastJoiner: boolean): Promise<void> {
    const src = Int32Array.of(isLastJoiner ? this.processGroup.rank : -1);
    await this.collective('last-joiner search', () => this.processGroup.allReduce(src, { op: ReduceOp.MAX }).wait());
    await this.collective('final model broadcast', () => broadcastTensors(moduleState(this.module, this.broadcastBuffers), this.processGroup, src[0]!));
  }
}

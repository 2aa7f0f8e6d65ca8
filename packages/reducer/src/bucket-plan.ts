import type { ProcessGroup } from '@ddp/comm';
import type { Parameter } from '@ddp/nn';
import { BucketCapTuner, type BucketCapTuning, DEFAULT_CAP_CANDIDATES_MB, firstCapUnder } from './autotune.js';
import type { Bucket, BucketSlot } from './bucket.js';
import { bucketArena, buildBuckets } from './bucket-layout.js';
import type { DDPOptions } from './options.js';

const MB = 1024 * 1024;

/** Runs one collective, naming it in the error it raises (DistributedDataParallel's DDPCommError). */
export type Collective = <T>(what: string, run: () => Promise<T>) => Promise<T>;

/**
 * Which parameter goes in which bucket: first in reverse registration order, rebuilt after
 * the first synchronized iteration in the order gradients became ready on rank 0, the cap of
 * every bucket but the first tuned over the next iterations when none was given.
 */
export class BucketPlan {
  /**
   * Shared memory for the gradients DDP copies, allocated once (pages touched only when used); the buckets are views of
   * it.
   */
  private readonly arena: Float32Array;
  buckets: Bucket[] = [];
  /** For each parameter, its bucket and slot. */
  slotOf: { bucket: Bucket; slot: BucketSlot }[] = [];
  /** Parameter indices in the order their gradients are expected (bucket order). */
  private order: number[];
  /** Order in which gradients became ready in the first synchronized backward. */
  private readyOrder: number[] = [];
  private rebuilt = false;
  private readonly firstCapBytes: number;
  private cap: number;
  /** Tunes the cap when none was given (null: bucketCapMB given, or a world of one). */
  private readonly tuner: BucketCapTuner | null;

  constructor(
    private readonly params: readonly { name: string; param: Parameter }[],
    opts: DDPOptions,
    worldSize: number,
  ) {
    this.firstCapBytes = (opts.firstBucketMB ?? 1) * MB;
    this.cap = opts.bucketCapMB ?? 25;
    const tune = opts.bucketCapMB === undefined && worldSize > 1;
    const candidates = opts.bucketCapCandidatesMB;
    this.tuner = tune ? new BucketCapTuner(candidates ?? DEFAULT_CAP_CANDIDATES_MB, candidates === undefined) : null;
    this.order = params.map((_, i) => params.length - 1 - i);
    this.arena = bucketArena(params);
    this.setBuckets();
  }

  /** The buckets' parameter names, in bucket order. */
  get layout(): string[][] {
    return this.buckets.map((b) => b.slots.map((s) => s.name));
  }

  /** The cap of every bucket but the first, in MiB: the one given, or the one the autotune is trying or kept. */
  get capMB(): number {
    return this.cap;
  }

  /** What the autotune measured and kept, once it is done (null while tuning, or without it). */
  get tuning(): BucketCapTuning | null {
    return this.tuner?.result ?? null;
  }

  /**
   * A parameter got its gradient: remembered until the buckets are rebuilt, once each (an iteration
   * that failed, a NonFiniteGradientError caught, never reached the rebuild: the next listed every
   * parameter twice, buckets held slots no work was issued for, and every later step failed; probe BA).
   */
  noteReady(index: number): void {
    if (!this.rebuilt && !this.readyOrder.includes(index)) this.readyOrder.push(index);
  }

  /** After an iteration of `ms`: rebuild the buckets after the first, then time the autotune's trials. */
  async afterIteration(ms: number, pg: ProcessGroup, collective: Collective): Promise<void> {
    if (!this.rebuilt) await this.rebuild(pg, collective);
    else if (this.tuner?.tuning) await this.tune(ms, pg, collective);
  }

  private setBuckets(): void {
    // a tuned cap that holds every gradient is one bucket, the first included
    const first = this.tuner ? firstCapUnder(this.cap, this.firstCapBytes, this.arena.length * 4) : this.firstCapBytes;
    this.buckets = buildBuckets(this.params, this.order, first, this.cap * MB, this.arena);
    this.slotOf = [];
    for (const bucket of this.buckets) for (const slot of bucket.slots) this.slotOf[slot.index] = { bucket, slot };
  }

  /** Buckets in the order gradients became ready on rank 0, broadcast so every rank agrees. */
  private async rebuild(pg: ProcessGroup, collective: Collective): Promise<void> {
    const seen = new Set(this.readyOrder);
    const rest = this.params.map((_, i) => this.params.length - 1 - i).filter((i) => !seen.has(i));
    const order = Int32Array.from([...this.readyOrder, ...rest]);
    await collective('bucket order broadcast', () => pg.broadcast(order, { src: 0 }).wait());
    this.order = [...order];
    if (this.tuner)
      this.cap = this.tuner.plan(
        this.order.map((i) => this.params[i].param.size),
        this.firstCapBytes,
      );
    this.setBuckets();
    this.rebuilt = true;
    this.readyOrder = [];
  }

  /** Times one iteration for the autotune; rebuilds the buckets when it moves to another cap. */
  private async tune(ms: number, pg: ProcessGroup, collective: Collective): Promise<void> {
    const next = await collective('bucket cap autotune all-reduce', () => this.tuner!.record(ms, pg));
    if (next !== this.cap) {
      this.cap = next;
      this.setBuckets();
    }
  }
}

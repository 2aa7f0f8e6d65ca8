import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import { assignBuckets } from './bucket-layout.js';

/** Caps tried when DistributedDataParallel is given no bucketCapMB (MiB), and one bucket for all gradients. */
export const DEFAULT_CAP_CANDIDATES_MB: readonly number[] = [2, 8, 25, 64];
const MB = 2 ** 20;

/**
 * The first bucket's limit (bytes) under a candidate cap: a cap that holds every gradient means
 * one bucket for all of them, the first included — the all-reduce after backward, what pays
 * where backward leaves no core for the comm thread (both cores running ranks) and several
 * buckets only add collectives.
 */
export const firstCapUnder = (capMB: number, firstCapBytes: number, totalBytes: number): number =>
  capMB * MB >= totalBytes ? capMB * MB : firstCapBytes;
/** Timed iterations per candidate cap; each candidate keeps its fastest. */
const STEPS_PER_CAP = 2;

/** What the tuning measured: per candidate cap, its fastest iteration (ms, slowest rank), and the cap kept. */
export interface BucketCapTuning {
  readonly candidatesMB: readonly number[];
  readonly msPerIteration: readonly number[];
  readonly chosenMB: number;
}

/**
 * Horovod's autotune reduced to one knob, the bucket cap: during the first synchronized
 * iterations each candidate cap is tried for a few iterations, timed from the first gradient
 * to the averages written back. The candidates take turns (2, 8, 25, 64, 2, 8, …), so a
 * drift in the machine's load hits them alike instead of favouring the caps tried while it
 * was quieter. At the end, one all-reduce (MAX) of every rank's times gives all ranks the
 * same table, so they all keep the same fastest cap. Candidates that give the same buckets
 * as an earlier one are skipped. With `oneBucket`, a cap holding every gradient (one bucket)
 * is tried too, so the tuner keeps it where overlap does not pay.
 */
export class BucketCapTuner {
  private candidates: number[] = [];
  private times: number[] = [];
  private step = 0;
  result: BucketCapTuning | null = null;

  constructor(
    private readonly candidatesMB: readonly number[],
    private readonly oneBucket = false,
  ) {}

  /** The candidates worth trying for parameters of these sizes (in expected order); returns the first cap. */
  plan(sizes: readonly number[], firstCapBytes: number): number {
    const total = sizes.reduce((n, s) => n + s * 4, 0);
    const seen = new Set<string>();
    const caps = this.oneBucket ? [...this.candidatesMB, Math.ceil(total / MB)] : this.candidatesMB;
    this.candidates = caps.filter((mb) => {
      const layout = JSON.stringify(assignBuckets(sizes, firstCapUnder(mb, firstCapBytes, total), mb * MB));
      return !seen.has(layout) && seen.add(layout);
    });
    this.times = this.candidates.map(() => Number.POSITIVE_INFINITY);
    const only = this.candidates[0];
    if (this.candidates.length <= 1)
      this.result = { candidatesMB: this.candidates, msPerIteration: [], chosenMB: only };
    return this.candidates[0];
  }

  get tuning(): boolean {
    return this.result === null && this.candidates.length > 0;
  }

  /**
   * Records one timed iteration (of the candidate whose turn it was). Returns the cap for the
   * next iteration: the next candidate in turn, or the winner after the agreement all-reduce.
   */
  async record(ms: number, group: ProcessGroup): Promise<number> {
    const n = this.candidates.length;
    const c = this.step % n;
    this.times[c] = Math.min(this.times[c], ms);
    this.step++;
    if (this.step < n * STEPS_PER_CAP) return this.candidates[this.step % n];
    const agreed = Float64Array.from(this.times);
    await group.allReduce(agreed, { op: ReduceOp.MAX }).wait();
    const best = agreed.indexOf(Math.min(...agreed));
    this.result = { candidatesMB: this.candidates, msPerIteration: [...agreed], chosenMB: this.candidates[best] };
    return this.result.chosenMB;
  }
}

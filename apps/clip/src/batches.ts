import { Generator } from '@ddp/data';

/**
 * Which samples each rank trains on, DistributedSampler-style: every epoch is a permutation of
 * the dataset drawn from Generator(seed + epoch) (the same on every rank); global batch m of
 * the epoch is positions [m·B, (m+1)·B) of it, and rank r takes positions r, r+N, r+2N, … of
 * that batch (so ranks differ by at most one sample when N does not divide B). Position u
 * (micro-batches since the start) fully determines the batch: resuming needs only u.
 */
export class GlobalBatchSampler {
  readonly batchesPerEpoch: number;
  private epoch = -1;
  private order: Int32Array = new Int32Array(0);

  constructor(
    readonly datasetSize: number,
    readonly globalBatch: number,
    readonly rank: number,
    readonly worldSize: number,
    readonly seed: number,
  ) {
    this.batchesPerEpoch = Math.floor(datasetSize / globalBatch);
    // no whole batch per epoch: every position would divide by zero (a "seed NaN" error far from here)
    if (!(this.batchesPerEpoch >= 1))
      throw new RangeError(`global batch ${globalBatch} is larger than the ${datasetSize} training samples`);
  }

  /** Epoch and batch within it of micro-batch u. */
  position(u: number): { epoch: number; batchInEpoch: number } {
    return { epoch: Math.floor(u / this.batchesPerEpoch), batchInEpoch: u % this.batchesPerEpoch };
  }

  /** This rank's sample indices of micro-batch u. */
  indices(u: number): number[] {
    const { epoch, batchInEpoch } = this.position(u);
    if (epoch !== this.epoch) {
      this.order = new Generator(this.seed + epoch).randperm(this.datasetSize);
      this.epoch = epoch;
    }
    const start = batchInEpoch * this.globalBatch;
    const mine: number[] = [];
    for (let p = start + this.rank; p < start + this.globalBatch; p += this.worldSize) mine.push(this.order[p]);
    return mine;
  }
}

import type { JoinHook } from '@ddp/join';
import type { DistributedDataParallel } from './ddp.js';

/**
 * DDP's side of join (PyTorch's _DDPJoinHook): a rank out of inputs all-reduces zero
 * gradients for every bucket while others still train, then the model of the last rank to
 * join is broadcast to all.
 */
export class DDPJoinHook implements JoinHook {
  constructor(private readonly ddp: DistributedDataParallel) {}

  mainHook(): Promise<void> {
    return this.ddp.shadowIteration();
  }

  postHook(isLastJoiner: boolean): Promise<void> {
    return this.ddp.syncFinalModel(isLastJoiner);
  }
}

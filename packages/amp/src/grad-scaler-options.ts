import type { Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';

export interface GradScalerOptions {
  /** Default 2^16. */
  initScale?: number;
  /** Default 2. */
  growthFactor?: number;
  /** Default 0.5. */
  backoffFactor?: number;
  /** Consecutive steps without inf/NaN after which the scale grows (default 2000). */
  growthInterval?: number;
  /** false: scale() returns the loss, step() just steps (default true). */
  enabled?: boolean;
  /**
   * The ranks that must agree on skipping a step: unscale_ all-reduces (MAX) whether any of
   * them found a non-finite gradient. Needed whenever ranks can see different gradients (no
   * DDP, ZeRO shards, a rank whose own compression overflowed); unset: this process alone.
   */
  processGroup?: ProcessGroup | null;
}

/** torch.cuda.amp.GradScaler's state_dict, camelCased. */
export interface GradScalerStateDict {
  scale: number;
  growthFactor: number;
  backoffFactor: number;
  growthInterval: number;
  growthTracker: number;
}

/** What GradScaler needs of an optimizer: @ddp/nn's (step is sync) and ZeRO's (async) both fit. */
export interface ScalableOptimizer {
  readonly paramGroups: readonly { params: readonly Tensor[] }[];
  step(): void | Promise<void>;
  /** Called instead of step() when the step is skipped: ends an iteration's bookkeeping (ZeRO stage 2's). */
  skipStep?(): void;
}

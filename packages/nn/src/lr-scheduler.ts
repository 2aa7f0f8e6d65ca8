/**
 * Learning-rate schedules in PyTorch's style: construct with an optimizer, call step() after
 * each optimizer.step(); the schedule writes each param group's lr from its initial lr.
 */

/** What a scheduler needs of an optimizer. */
export interface HasParamGroups {
  paramGroups: { lr: number; initialLr?: number }[];
}

export interface SchedulerState {
  lastEpoch: number;
  baseLrs: number[];
  /** The schedule's own settings (absent in checkpoints written before they were saved). */
  options?: Record<string, number>;
}

export class SchedulerError extends Error {
  override name = 'SchedulerError';
}

export abstract class LRScheduler {
  readonly baseLrs: number[];
  lastEpoch = 0;
  /** The lr this scheduler last wrote into each group: a different value at step() means someone else wrote it. */
  private written: number[] = [];

  constructor(readonly optimizer: HasParamGroups) {
    for (const group of optimizer.paramGroups) group.initialLr ??= group.lr;
    this.baseLrs = optimizer.paramGroups.map((g) => g.initialLr as number);
  }

  /** The learning rate at `step` for a group whose initial lr is `baseLr`. */
  abstract lrAt(step: number, baseLr: number): number;

  /** The schedule's settings (step size, warm-up, floor…), saved and restored with its state. */
  abstract readonly options: object;

  /**
   * Advances one step. Refuses when a group's lr is no longer the one this scheduler wrote:
   * the lr here is computed from the initial lr (closed form), so a second scheduler on the
   * same optimizer, or an lr set by hand, would be overwritten without a word, where torch's
   * chainable schedulers multiply the current lr.
   */
  step(): void {
    this.optimizer.paramGroups.forEach((g, i) => {
      const mine = this.written[i];
      if (mine !== undefined && !Object.is(g.lr, mine))
        throw new SchedulerError(
          `${this.constructor.name}.step: param group ${i}'s lr is ${g.lr}, not the ${mine} this scheduler set: ` +
            'another scheduler or code changed it, and this one would overwrite it (its lr is a function of the ' +
            'initial lr; torch multiplies chained schedulers): use one schedule per optimizer',
        );
    });
    this.lastEpoch++;
    this.apply();
  }

  getLastLr(): number[] {
    return this.optimizer.paramGroups.map((g) => g.lr);
  }

  /**
   * Step, initial lrs and settings: as torch's state_dict, loading restores the schedule whole (a
   * resumed run built with another total or floor went on with a schedule neither run had).
   */
  stateDict(): SchedulerState {
    return { lastEpoch: this.lastEpoch, baseLrs: [...this.baseLrs], options: { ...this.options } as never };
  }

  loadStateDict(state: SchedulerState): void {
    if (state.baseLrs.length !== this.baseLrs.length) {
      throw new SchedulerError(`state has ${state.baseLrs.length} param groups, the optimizer ${this.baseLrs.length}`);
    }
    this.lastEpoch = state.lastEpoch;
    this.baseLrs.splice(0, this.baseLrs.length, ...state.baseLrs);
    if (state.options) Object.assign(this.options, state.options);
    this.apply();
  }

  /** Writes the current step's lr into every group; subclasses call it once constructed. */
  protected apply(): void {
    this.written = this.optimizer.paramGroups.map((g, i) => {
      g.lr = this.lrAt(this.lastEpoch, this.baseLrs[i]);
      return g.lr;
    });
  }
}

/** torch.optim.lr_scheduler.StepLR: lr = base · gamma^⌊step / stepSize⌋. */
export class StepLR extends LRScheduler {
  readonly options: { stepSize: number; gamma: number };

  constructor(optimizer: HasParamGroups, stepSize: number, gamma = 0.1) {
    if (!Number.isInteger(stepSize) || stepSize <= 0)
      throw new SchedulerError(`stepSize must be a positive integer, got ${stepSize}`);
    super(optimizer);
    this.options = { stepSize, gamma };
    this.apply();
  }

  get stepSize(): number {
    return this.options.stepSize;
  }

  get gamma(): number {
    return this.options.gamma;
  }

  lrAt(step: number, baseLr: number): number {
    return baseLr * this.gamma ** Math.floor(step / this.stepSize);
  }
}

export interface WarmupCosineOptions {
  warmupSteps: number;
  totalSteps: number;
  /** The floor the cosine decays to (default 0). */
  minLr?: number;
}

/**
 * Linear warm-up from 0 to base over `warmupSteps`, then half a cosine from base down to
 * `minLr` at `totalSteps`, then `minLr` (as transformers' get_cosine_schedule_with_warmup).
 */
export function warmupCosineLr(
  step: number,
  baseLr: number,
  { warmupSteps, totalSteps, minLr = 0 }: WarmupCosineOptions,
): number {
  if (step < warmupSteps) return (baseLr * step) / warmupSteps;
  if (step >= totalSteps) return minLr;
  const progress = (step - warmupSteps) / Math.max(1, totalSteps - warmupSteps);
  return minLr + (baseLr - minLr) * 0.5 * (1 + Math.cos(Math.PI * progress));
}

export class WarmupCosineLR extends LRScheduler {
  readonly options: WarmupCosineOptions;

  constructor(optimizer: HasParamGroups, options: WarmupCosineOptions) {
    const { warmupSteps, totalSteps } = options;
    if (!(warmupSteps >= 0 && totalSteps >= warmupSteps)) {
      throw new SchedulerError(`need 0 <= warmupSteps <= totalSteps, got ${warmupSteps} and ${totalSteps}`);
    }
    super(optimizer);
    this.options = { ...options };
    this.apply();
  }

  lrAt(step: number, baseLr: number): number {
    return warmupCosineLr(step, baseLr, this.options);
  }
}

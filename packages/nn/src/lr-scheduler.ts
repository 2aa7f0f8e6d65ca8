/**
 * Learning-rate schedules in PyTorch's style: construct with an optimizer, call step() after
 * each optimizer.step(); the schedule writes each param group's lr from its initial lr.
 */
import { checkOptionNames } from '@ddp/tensor';

/** What a scheduler needs of an optimizer. */
export interface HasParamGroups {
  paramGroups: { lr: number; initialLr?: number }[];
}

export interface SchedulerState {
  lastEpoch: number;
  baseLrs: number[];
  /** The schedule's own settings (absent in checkpoints written before they were saved). */
  options?: Record<string, number>;
  /** The scheduler's class (`StepLR`); absent in checkpoints written before it was saved. */
  kind?: string;
}

export class SchedulerError extends Error {
  override name = 'SchedulerError';
}

export abstract class LRScheduler {
  readonly baseLrs: number[];
  lastEpoch = 0;
  /** The lr this scheduler last wrote into each group: a different value at step() means someone else wrote it. */
  private written: number[] = [];
  /**
   * Groups that carried an initialLr (an earlier schedule's, or a loaded optimizer state's) and
   * another lr when this scheduler was made, with that lr: which one to schedule from is unknown
   * until its state is loaded. The schedule wrote the initial lr's over the lr set by hand (probe AE).
   */
  private unresolved: { group: number; lr: number }[];

  constructor(readonly optimizer: HasParamGroups) {
    this.unresolved = optimizer.paramGroups.flatMap((g, group) =>
      g.initialLr !== undefined && g.initialLr !== g.lr ? [{ group, lr: g.lr }] : [],
    );
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
  step(...args: []): void {
    // torch's deprecated step(epoch) jumps to that epoch; ignored here (no types under tsx), the
    // schedule went on one step from where it was
    if (args.length > 0)
      throw new SchedulerError(
        `${this.constructor.name}.step takes no epoch (torch's step(epoch) is deprecated): call step() once ` +
          'per step; to resume, load the scheduler state',
      );
    this.checkGroups('step');
    const [first] = this.unresolved;
    if (first !== undefined)
      throw new SchedulerError(
        `${this.constructor.name}.step: param group ${first.group} had lr ${first.lr} when this scheduler was made, ` +
          `and initialLr ${this.baseLrs[first.group]} from an earlier schedule or a loaded optimizer state, which ` +
          "this schedule computes from: load the earlier schedule's state to resume it, or set the group's " +
          'initialLr to its lr before making a schedule from the lr it has now (as torch chains from it)',
      );
    this.optimizer.paramGroups.forEach((g, i) => {
      const mine = this.written[i];
      if (mine !== undefined && !Object.is(g.lr, mine))
        throw new SchedulerError(
          `${this.constructor.name}.step: param group ${i}'s lr is ${g.lr}, not the ${mine} this scheduler set: ` +
            'another scheduler or code changed it, and this one would overwrite it (its lr is a function of the ' +
            'initial lr; torch multiplies chained schedulers): use one schedule per optimizer',
        );
    });
    this.warnIfBeforeOptimizer();
    this.lastEpoch++;
    this.apply();
  }

  private warned = false;

  /**
   * torch's warning: a schedule stepped before the optimizer's first step skips its first value; the
   * usual cause is a step per micro-batch under gradient accumulation, whose warmup then ends early
   * (probe AL: a 4-step warmup over after the first optimizer step). Optimizers that count steps only.
   */
  private warnIfBeforeOptimizer(): void {
    const { stepCount } = this.optimizer as { stepCount?: unknown };
    if (this.warned || stepCount !== 0) return;
    this.warned = true;
    process.emitWarning(
      `${this.constructor.name}.step() before the optimizer's first step(): the schedule's first value is ` +
        'skipped. Step the scheduler once per optimizer step, after it (not per micro-batch); a GradScaler ' +
        'that skipped the first steps (non-finite gradients) causes this too',
      { code: 'DDP_SCHEDULER_BEFORE_OPTIMIZER' },
    );
  }

  getLastLr(): number[] {
    return this.optimizer.paramGroups.map((g) => g.lr);
  }

  /**
   * Step, initial lrs and settings: as torch's state_dict, loading restores the schedule whole (a
   * resumed run built with another total or floor went on with a schedule neither run had).
   */
  stateDict(): SchedulerState {
    const options = { ...this.options } as never;
    return { lastEpoch: this.lastEpoch, baseLrs: [...this.baseLrs], options, kind: this.constructor.name };
  }

  /**
   * Refuses a state that does not fit, changing nothing: another scheduler's (a cosine schedule's
   * settings merged into a StepLR), another number of groups, a setting that is not a number.
   */
  checkState(state: SchedulerState): void {
    const name = this.constructor.name;
    if (state.kind !== undefined && state.kind !== name)
      throw new SchedulerError(`state of a ${state.kind}, loaded into a ${name}`);
    if (state.baseLrs.length !== this.baseLrs.length) {
      throw new SchedulerError(`state has ${state.baseLrs.length} param groups, the optimizer ${this.baseLrs.length}`);
    }
    this.checkGroups('loadStateDict');
    const bad = Object.entries(state.options ?? {}).find(([k, v]) => !(k in this.options) || typeof v !== 'number');
    if (bad) throw new SchedulerError(`state's setting ${bad[0]} = ${JSON.stringify(bad[1])} is not one of ${name}'s`);
  }

  loadStateDict(state: SchedulerState): void {
    this.checkState(state);
    this.lastEpoch = state.lastEpoch;
    this.baseLrs.splice(0, this.baseLrs.length, ...state.baseLrs);
    this.unresolved = [];
    this.optimizer.paramGroups.forEach((g, i) => {
      g.initialLr = this.baseLrs[i];
    });
    if (state.options) Object.assign(this.options, this.unsavedDefaults(), state.options);
    this.apply();
  }

  /** Settings a state may lack because older versions left them out when they held their default. */
  protected unsavedDefaults(): object {
    return {};
  }

  /**
   * A group added after the scheduler has no initial lr here: its lr became NaN. torch's
   * chainable schedules multiply whatever lr it has; these compute from the initial one.
   */
  private checkGroups(op: string): void {
    const groups = this.optimizer.paramGroups.length;
    if (groups === this.baseLrs.length) return;
    throw new SchedulerError(
      `${this.constructor.name}.${op}: the optimizer has ${groups} param groups, the scheduler was made for ` +
        `${this.baseLrs.length}: create the scheduler after adding every param group`,
    );
  }

  /** Writes the current step's lr into every group; subclasses call it once constructed. */
  protected apply(): void {
    if (this.unresolved.length > 0) return; // the lr set by hand stays until the state is loaded
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
    // an options object in gamma's place ({ gamma: 0.5 }, torch's keyword) made every lr NaN
    if (typeof gamma !== 'number' || !Number.isFinite(gamma))
      throw new SchedulerError(`StepLR: gamma must be a finite number, got ${JSON.stringify(gamma)}`);
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
  /**
   * The floor the cosine decays to (default 0), for the group of the largest initial lr; each
   * group's floor is the same fraction of its own initial lr (transformers' min_lr), so a group
   * at lr 0 stays at 0.
   */
  minLr?: number;
}

/**
 * Linear warm-up from 0 to base over `warmupSteps`, then half a cosine from base down to
 * `minLr` at `totalSteps`, then `minLr` (as transformers' get_cosine_schedule_with_warmup).
 * `minLr` is this group's own floor.
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
    // a misspelt floor or warm-up (min_lr, warmup_steps) was dropped: no floor, no warm-up
    checkOptionNames('WarmupCosineLR', options, ['warmupSteps', 'totalSteps', 'minLr'], (m) => new SchedulerError(m));
    const { warmupSteps, totalSteps, minLr = 0 } = options;
    // integers, as torch's: an infinite total was saved as null and resumed at lr 0
    if (!(Number.isSafeInteger(warmupSteps) && Number.isSafeInteger(totalSteps) && 0 <= warmupSteps)) {
      throw new SchedulerError(
        `warmupSteps and totalSteps must be integers >= 0, got ${warmupSteps} and ${totalSteps}`,
      );
    }
    if (totalSteps < warmupSteps) {
      throw new SchedulerError(`need 0 <= warmupSteps <= totalSteps, got ${warmupSteps} and ${totalSteps}`);
    }
    if (!(minLr >= 0 && Number.isFinite(minLr))) throw new SchedulerError(`minLr must be >= 0, got ${minLr}`);
    super(optimizer);
    // the floor always saved: left out when defaulted, a resume built with another floor kept its own, silently
    this.options = { warmupSteps, totalSteps, minLr };
    this.apply();
  }

  /** States saved before the floor always was left it out when it was the default. */
  protected override unsavedDefaults(): object {
    return { minLr: 0 };
  }

  lrAt(step: number, baseLr: number): number {
    // the floor as a fraction of the largest initial lr: one absolute floor lifted a frozen (lr 0) group to it
    const largest = Math.max(...this.baseLrs);
    const minLr = largest > 0 ? ((this.options.minLr ?? 0) * baseLr) / largest : 0;
    return warmupCosineLr(step, baseLr, { ...this.options, minLr });
  }
}

import { gradientShardGroups, mul, type Tensor, whileWriting } from '@ddp/autograd';
import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import { currentJoinNotice, isJoinActive, type Joinable, type JoinHook } from '@ddp/join';
import { checkBooleanOptions, checkNumberOptions, checkOptionNames, tf } from '@ddp/tensor';
import { GradScalerError, refuseFreed } from './errors.js';
import type { GradScalerOptions, GradScalerStateDict, ScalableOptimizer } from './grad-scaler-options.js';

export type { GradScalerOptions, GradScalerStateDict, ScalableOptimizer };

interface OptimizerState {
  foundInf: boolean | null;
  stepped: boolean;
  running: Promise<unknown> | null; // an unscale_ not yet done (called without await)
}

const f32 = Math.fround;
const paramsOf = (optimizer: ScalableOptimizer) => optimizer.paramGroups.flatMap((g) => g.params);

/**
 * Loss scaling for mixed precision with PyTorch's GradScaler semantics: scale(loss) multiplies by the
 * scale; unscale_ divides the gradients back and records whether any is inf/NaN; step skips the
 * optimizer's update when one was (on every rank of processGroup alike); update halves the scale after a
 * skipped step (backoffFactor), doubles it after growthInterval clean steps (growthFactor, unless that
 * overflows). The scale is float32 arithmetic, as torch's tensor.
 */
export class GradScaler implements Joinable {
  private currentScale: number;
  private growthTracker = 0;
  private growthFactor: number;
  private backoffFactor: number;
  private growthInterval: number;
  private readonly enabled: boolean;
  private readonly processGroup: ProcessGroup | undefined;
  private readonly perOptimizer = new Map<ScalableOptimizer, OptimizerState>();
  private readonly agreement = new Float32Array(2);
  /** Optimizers unscaled (one agreement each) in the last step: what a joined rank shadows. */
  private agreementsPerStep = 1;
  private warnedUnjoined = false;

  constructor(opts: GradScalerOptions = {}) {
    const known = ['initScale', 'growthFactor', 'backoffFactor', 'growthInterval', 'enabled', 'processGroup'];
    checkOptionNames('GradScaler', opts, known, (m) => new GradScalerError(m));
    checkBooleanOptions('GradScaler', opts, ['enabled'], (m) => new GradScalerError(m));
    const numbers = ['initScale', 'growthFactor', 'backoffFactor', 'growthInterval'];
    checkNumberOptions('GradScaler', opts, numbers, (m) => new GradScalerError(m)); // a string went into state dicts
    this.currentScale = f32(opts.initScale ?? 2 ** 16);
    this.growthFactor = opts.growthFactor ?? 2;
    this.backoffFactor = opts.backoffFactor ?? 0.5;
    this.growthInterval = opts.growthInterval ?? 2000;
    this.enabled = opts.enabled ?? true;
    this.processGroup = opts.processGroup ?? undefined; // null (outside a group): this process alone, as unset
    if (!(this.currentScale > 0 && Number.isFinite(this.currentScale)))
      throw new GradScalerError(`initScale must be a positive finite number, got ${opts.initScale}`);
    if (!(this.growthFactor > 1)) throw new GradScalerError(`growthFactor must be > 1, got ${this.growthFactor}`);
    if (!(this.backoffFactor > 0 && this.backoffFactor < 1))
      throw new GradScalerError(`backoffFactor must be in (0, 1), got ${this.backoffFactor}`);
    if (!(Number.isInteger(this.growthInterval) && this.growthInterval > 0)) {
      throw new GradScalerError(`growthInterval must be a positive integer, got ${this.growthInterval}`);
    }
  }

  isEnabled(): boolean {
    return this.enabled;
  }

  /** The current scale (1 when disabled). */
  getScale(): number {
    return this.enabled ? this.currentScale : 1;
  }

  /** loss × scale, to call backward on (torch's scaler.scale(loss)). */
  scale(loss: Tensor): Tensor {
    return this.enabled ? mul(loss, this.currentScale) : loss;
  }

  /**
   * Divides the optimizer's gradients by the scale in place and records whether any rank of processGroup
   * holds an inf/NaN among them (one all-reduce). Call it before clipping gradients; step() calls it when
   * you did not, or awaits it when not awaited (step divided the gradients again). Once between updates.
   */
  async unscale_(optimizer: ScalableOptimizer): Promise<void> {
    if (!this.enabled) return;
    const state = this.stateOf(optimizer);
    if (state.running) throw new GradScalerError('unscale_() is still running: await it');
    // the gradients are marked written until it settles: clipping before it is awaited clipped scaled gradients
    state.running = whileWriting(paramsOf(optimizer), 'scaler.unscale_()', 'gradients', () =>
      this.unscaleNow(optimizer, state),
    );
    await state.running.finally(() => (state.running = null));
  }

  private async unscaleNow(optimizer: ScalableOptimizer, state: OptimizerState): Promise<void> {
    if (state.foundInf !== null)
      throw new GradScalerError('unscale_() has already been called on this optimizer since the last update()');
    if (state.stepped) throw new GradScalerError('unscale_() is being called after step()');
    this.checkSplitGradients(optimizer);
    refuseFreed(optimizer);
    const invScale = f32(1 / this.currentScale);
    let [found, seen] = [false, false];
    for (const group of optimizer.paramGroups) {
      for (const p of group.params) {
        const grad = p.grad;
        if (grad === null) continue;
        seen = true;
        if (!found && !(grad.dataSync() as Float32Array).every(Number.isFinite)) found = true;
        p.grad = tf.mul(grad, invScale);
      }
    }
    this.warnIfNotJoined();
    const agreed = await this.agree(found, seen);
    // torch: "No inf checks were recorded for this optimizer". A step with no gradient on any rank (a forgotten
    // backward) counted as a clean step and grew the scale
    if (!agreed.seen)
      throw new GradScalerError('unscale_(): no parameter has a gradient on any rank (did backward run?)');
    state.foundInf = agreed.found;
  }

  /**
   * Unscales (unless unscale_ ran) and steps the optimizer unless some rank found an inf/NaN
   * gradient. Returns whether it stepped.
   */
  step(optimizer: ScalableOptimizer): Promise<boolean> {
    // marked written until it settles: zeroGrad() before it was awaited cleared the gradients first (no step)
    return whileWriting(paramsOf(optimizer), 'scaler.step()', 'values', () => this.stepNow(optimizer));
  }

  private async stepNow(optimizer: ScalableOptimizer): Promise<boolean> {
    if (!this.enabled) {
      await optimizer.step();
      return true;
    }
    const state = this.stateOf(optimizer);
    if (state.stepped) throw new GradScalerError('step() has already been called since the last update()');
    if (state.running) await state.running; // an unscale_ not awaited: its result, not a second division
    if (state.foundInf === null) await this.unscale_(optimizer);
    state.stepped = true;
    if (state.foundInf) {
      optimizer.skipStep?.();
      return false;
    }
    await optimizer.step();
    return true;
  }

  /**
   * Adjusts the scale from the steps since the last update (or sets it to newScale) and forgets them: back off
   * after an inf/NaN, grow after growthInterval clean steps. Refuses a step not awaited (an overflow was missed).
   */
  update(newScale?: number): void {
    if (!this.enabled) return;
    if ([...this.perOptimizer.values()].some((s) => s.running !== null || (s.stepped && s.foundInf === null)))
      throw new GradScalerError('update(): a step() or unscale_() is still running (not awaited): await it first');
    const checked = [...this.perOptimizer.values()].filter((s) => s.foundInf !== null);
    if (newScale !== undefined) {
      if (!(newScale > 0 && Number.isFinite(newScale)))
        throw new GradScalerError(`update: newScale must be a positive finite number, got ${newScale}`);
      this.currentScale = f32(newScale);
    } else {
      if (checked.length === 0)
        throw new GradScalerError('update(): no inf checks were recorded (call step() or unscale_() first)');
      this.adjust(checked.some((s) => s.foundInf));
    }
    this.agreementsPerStep = checked.length || 1;
    this.perOptimizer.clear();
  }

  /**
   * Under `join` with uneven inputs, a joined rank all-reduces "no inf, no gradient" in place of
   * each agreement the active ranks make per step, and updates its scale from what they agreed, as
   * their update() does: it kept the scale it joined with, and once inputs were even again DDP
   * averaged gradients scaled by different factors (the replicas drifted apart, silently). List the
   * scaler where its all-reduce falls in an iteration: after DDP (`join([ddp, scaler], …)`).
   */
  joinHook(): JoinHook {
    return {
      mainHook: async () => {
        let found = false;
        for (let i = 0; i < this.agreementsPerStep; i++) found = (await this.agree(false, false)).found || found;
        if (this.enabled) this.adjust(found);
      },
      postHook: () => {},
    };
  }

  get joinProcessGroup(): ProcessGroup {
    if (this.processGroup === undefined)
      throw new GradScalerError('join: a GradScaler needs a processGroup to be a Joinable (it has no collective)');
    return this.processGroup;
  }

  /** The scale, growth tracker, factors and interval; empty for a disabled scaler, as torch's. */
  stateDict(): GradScalerStateDict | Record<string, never> {
    if (!this.enabled) return {};
    const { currentScale: scale, growthFactor, backoffFactor, growthInterval, growthTracker } = this;
    return { scale, growthFactor, backoffFactor, growthInterval, growthTracker };
  }

  /**
   * Restores the scale and growth tracker (factors and interval too, as torch does); a disabled
   * scaler ignores it. An empty one (a disabled scaler's) is refused, as torch refuses it: a disabled
   * scaler's full state restarted an enabled one at the disabled one's initScale, silently (probe AI).
   */
  loadStateDict(sd: GradScalerStateDict | Record<string, never>): void {
    if (!this.enabled) return;
    if (Object.keys(sd).length === 0)
      throw new GradScalerError(
        "loadStateDict: the state dict is empty, as a disabled GradScaler's is: its scale was never kept",
      );
    const { scale, growthFactor, backoffFactor, growthInterval, growthTracker } = sd as GradScalerStateDict;
    const checked = new GradScaler({ initScale: scale, growthFactor, backoffFactor, growthInterval }); // validates them
    if (!(Number.isInteger(growthTracker) && growthTracker >= 0))
      throw new GradScalerError(`growthTracker must be a non-negative integer, got ${growthTracker}`);
    this.currentScale = checked.currentScale;
    this.growthTracker = growthTracker;
    [this.growthFactor, this.backoffFactor, this.growthInterval] = [growthFactor, backoffFactor, growthInterval];
  }

  /** torch's _amp_update_scale_ kernel: a float32 scale times the double factor, rounded once. */
  private adjust(foundInf: boolean): void {
    if (foundInf) {
      this.currentScale = f32(this.currentScale * this.backoffFactor);
      this.growthTracker = 0;
      return;
    }
    this.growthTracker++;
    if (this.growthTracker < this.growthInterval) return;
    const grown = f32(this.currentScale * this.growthFactor);
    if (Number.isFinite(grown)) this.currentScale = grown;
    this.growthTracker = 0;
  }

  /**
   * A gradient split over ranks (a pipeline stage's, a tensor-parallel or ZeRO-2/FSDP shard: marked
   * by those packages) holds an inf on some ranks only: without a processGroup covering them, the
   * others stepped while it skipped, their scales drifted apart, and every later gradient of that
   * stage was off by their ratio, silently.
   */
  private checkSplitGradients(optimizer: ScalableOptimizer): void {
    const covered = new Set(this.processGroup?.ranks ?? []);
    for (const [g, group] of optimizer.paramGroups.entries()) {
      for (const [i, p] of group.params.entries()) {
        // a rank whose shard holds no gradient (ZeRO-2 with more ranks than parameters) must refuse too
        const split = gradientShardGroups(p).find((over) => over.ranks.some((r) => !covered.has(r)));
        if (split === undefined) continue;
        throw new GradScalerError(
          `unscale_(): param group ${g}'s parameter ${i} has its gradient split over the ranks [${split.ranks}] ` +
            `(a pipeline stage, or a tensor-parallel, ZeRO-2 or FSDP shard), ${
              this.processGroup
                ? `which processGroup [${this.processGroup.ranks}] does not cover`
                : 'and no processGroup'
            }: they would disagree on skipping a step. ` +
            "Pass a processGroup holding them (the world, or the grid's group)",
        );
      }
    }
  }

  /** An active rank's agreement inside a join that does not list the scaler: uneven inputs would mismatch. */
  private warnIfNotJoined(): void {
    if (this.processGroup === undefined || currentJoinNotice() === null || isJoinActive(this)) return;
    if (this.warnedUnjoined) return;
    this.warnedUnjoined = true;
    process.emitWarning(
      "GradScaler: its processGroup's all-reduce runs inside join, but the scaler is not among join's " +
        'joinables: with uneven inputs the ranks would call different collectives. List it after DDP and ' +
        'before the optimizer: join([ddp, scaler, optimizer], …)',
      { code: 'DDP_SCALER_NOT_JOINED' },
    );
  }

  /** Whether any rank found an inf/NaN, and whether any rank saw a gradient at all (one all-reduce). */
  private async agree(found: boolean, seen: boolean): Promise<{ found: boolean; seen: boolean }> {
    if (this.processGroup === undefined || this.processGroup.size === 1) return { found, seen };
    this.agreement[0] = found ? 1 : 0;
    this.agreement[1] = seen ? 1 : 0;
    await this.processGroup.allReduce(this.agreement, { op: ReduceOp.MAX }).wait();
    return { found: this.agreement[0] !== 0, seen: this.agreement[1] !== 0 };
  }

  private stateOf(optimizer: ScalableOptimizer): OptimizerState {
    let state = this.perOptimizer.get(optimizer);
    if (state === undefined) {
      state = { foundInf: null, stepped: false, running: null };
      this.perOptimizer.set(optimizer, state);
    }
    return state;
  }
}

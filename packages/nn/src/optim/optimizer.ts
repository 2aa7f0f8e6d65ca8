import { freedParameterProblem, pendingWriter, type Tensor } from '@ddp/autograd';
import { checkOptionNames, tf } from '@ddp/tensor';
import { checkStateValues, stateDictParams } from './state-dict-check.js';

/** Per-parameter optimizer state: tensors (momentum buffers, moments) and numbers (step). */
export type ParamState = Record<string, tf.Tensor | number>;

/** A parameter group: its parameters and the hyperparameters that apply to them. */
export type ParamGroup<O> = O & { params: Tensor[]; lr: number; initialLr?: number };

/** What the constructor and addParamGroup take: a group with any hyperparameter overridden. */
export type ParamGroupInput<O> = Partial<O> & { params: Tensor[] };

/**
 * torch.optim's state dict: parameters are referred to by their position across the groups;
 * state tensors are borrowed from the optimizer (clone to keep).
 */
export interface OptimizerStateDict<O> {
  state: Map<number, ParamState>;
  paramGroups: (O & { lr: number; initialLr?: number; params: number[] })[];
  /** The optimizer's class (`Adam`); absent in state dicts written before it was saved. */
  kind?: string;
}

export class OptimizerError extends Error {
  override name = 'OptimizerError';
}

/** Options the optimizer does not know (`weight_decay` for weightDecay) raise OptimizerError. */
export function checkOptimizerOptions(optimizer: string, options: object, known: readonly string[]): void {
  checkOptionNames(optimizer, options, known, (message) => new OptimizerError(message));
}

/** How an optimizer checks each parameter group: the hyperparameters it knows, and their values (merged). */
export interface GroupCheck<O> {
  names: readonly string[];
  /** The per-parameter state its update keeps (what a loaded state may hold). */
  state: readonly string[];
  /** Raises OptimizerError for a value the update cannot use; `where` names the group. */
  values(o: O, where: string): void;
}

export abstract class Optimizer<O extends { lr: number }> {
  readonly paramGroups: ParamGroup<O>[] = [];
  readonly state = new Map<Tensor, ParamState>();
  /** Steps called (as torch counts them: a scheduler stepped before the first says so). */
  stepCount = 0;

  /** The hyperparameters a group not giving its own takes: this optimizer's copy of those it was given. */
  readonly defaults: O;

  constructor(
    params: Tensor[] | ParamGroupInput<O>[],
    defaults: O,
    /** Absent: the groups are checked by an optimizer this one wraps (ZeRO: see adoptGroupCheck). */
    private groupCheck?: GroupCheck<O>,
  ) {
    // the caller's object (a config shared by two optimizers) is theirs: ZeRO completing its defaults
    // wrote Adam's weightDecay 0 into it, and an AdamW built from it next lost its 0.01, silently (probe BU)
    this.defaults = ownValues(defaults) as O;
    if (params.length === 0) throw new OptimizerError('optimizer got an empty parameter list');
    const groups = isGroupList(params) ? params : [{ params } as ParamGroupInput<O>];
    for (const g of groups) this.addParamGroup(g);
  }

  addParamGroup(group: ParamGroupInput<O>): void {
    const seen = new Set(this.paramGroups.flatMap((g) => g.params));
    const inGroup = new Set<Tensor>();
    for (const [i, p] of group.params.entries()) {
      if (seen.has(p)) throw new OptimizerError('some parameters appear in more than one parameter group');
      // twice in one group, step() would update it twice (a tied weight listed under both names)
      if (inGroup.has(p)) {
        throw new OptimizerError(
          `parameter ${i} of the group is already in it: each parameter once (a tied weight listed twice?)`,
        );
      }
      inGroup.add(p);
      if (!p.isLeaf) throw new OptimizerError("can't optimize a non-leaf Tensor");
    }
    const { params, ...given } = group;
    // a value left undefined ({ lr: cfg.headLr } without one) is one not given: spread over the
    // default, it made the weights NaN
    const merged = ownValues(this.defaults);
    for (const [k, v] of Object.entries(given)) if (v !== undefined) merged[k] = ownValue(v);
    this.checkGroup(merged as O, given, this.paramGroups.length, 'parameter group');
    this.paramGroups.push({ ...merged, params: [...params] } as ParamGroup<O>);
  }

  /** Refuses a group's unknown hyperparameters (`given`) and values its update cannot use. */
  private checkGroup(group: O, given: object, index: number, what: string): void {
    if (!this.groupCheck) return;
    const where = `${this.constructor.name} ${what} ${index}`;
    // a group may carry initialLr (a scheduler's), as torch's param_groups carry initial_lr
    const known = [...this.groupCheck.names, 'initialLr', 'params'];
    checkOptionNames(where, given, known, (m) => new OptimizerError(m));
    this.groupCheck.values(group, where);
  }

  /**
   * The groups' hyperparameters as they are now: a value set by hand between steps (`g.weight_decay = 0.5`,
   * an lr read from a config as '0.2') was ignored or failed inside the update kernel (probe BU).
   */
  protected checkGroupsAtStep(): void {
    for (const [i, g] of this.paramGroups.entries()) this.checkGroup(g, g, i, 'step(): param group');
  }

  /** Applies one update to every parameter that has a gradient. */
  step(...args: []): void {
    refuseStepArguments(this.constructor.name, args);
    this.checkGroupsAtStep();
    this.stepCount++;
    for (const group of this.paramGroups) refusePendingGradients('step()', group.params);
    for (const [g, group] of this.paramGroups.entries())
      refuseFreedParameters('step', group.params, 'the optimizer was built', (i) => `parameter ${i} of group ${g}`);
    for (const group of this.paramGroups) {
      for (const p of group.params) {
        if (p.grad === null) continue;
        const state = this.state.get(p) ?? {};
        this.state.set(p, state);
        const { param, ...next } = tf.tidy(() => this.update(group, p.data, p.grad as tf.Tensor, state));
        p.data = param;
        for (const [k, v] of Object.entries(next)) {
          const old = state[k];
          if (old instanceof tf.Tensor && old !== v) old.dispose();
          state[k] = v as tf.Tensor | number;
        }
      }
    }
  }

  /**
   * One parameter's update, run inside tf.tidy: returns the new parameter value and the
   * state entries that changed (the returned tensors survive; replaced ones are disposed).
   */
  protected abstract update(
    group: ParamGroup<O>,
    param: tf.Tensor,
    grad: tf.Tensor,
    state: ParamState,
  ): { param: tf.Tensor } & ParamState;

  zeroGrad(setToNone = true): void {
    for (const g of this.paramGroups) refusePendingGradients('zeroGrad()', g.params);
    for (const g of this.paramGroups) {
      for (const p of g.params) {
        if (p.grad !== null) p.grad = setToNone ? null : tf.zerosLike(p.grad);
      }
    }
  }

  stateDict(): OptimizerStateDict<O> {
    const index = new Map<Tensor, number>();
    const paramGroups = this.paramGroups.map(({ params, ...hyper }) => ({
      ...(hyper as unknown as O & { lr: number }),
      params: params.map((p) => {
        index.set(p, index.size);
        return index.size - 1;
      }),
    }));
    const state = new Map<number, ParamState>();
    for (const [p, s] of this.state) {
      const i = index.get(p);
      if (i !== undefined) state.set(i, s);
    }
    return { state, paramGroups, kind: this.stateKind() };
  }

  /** The class a state dict of this optimizer comes from (ZeRO: the optimizer it wraps). */
  stateKind(): string {
    return this.constructor.name;
  }

  /**
   * Refuses a state dict that does not fit, changing nothing: another optimizer class (Adam's
   * moments and betas loaded into SGD, silently), another group layout, state of other shapes.
   * Returns the parameter each index names.
   */
  checkStateDict(sd: OptimizerStateDict<O>): Tensor[] {
    if (sd.kind !== undefined && sd.kind !== this.stateKind())
      throw new OptimizerError(`state dict of ${sd.kind}, loaded into ${this.stateKind()}`);
    const byIndex = stateDictParams(sd, this.paramGroups, (m) => new OptimizerError(m));
    this.checkLoadedValues(sd);
    return byIndex;
  }

  /** Refuses groups' hyperparameters and state entries this optimizer does not know or cannot use. */
  protected checkLoadedValues(sd: OptimizerStateDict<O>): void {
    if (this.groupCheck) checkStateValues(sd, this.paramGroups, this.groupCheck, this.stateKind());
  }

  /** Checks loaded groups and state as `wrapped` checks its own (ZeRO, after making the optimizer it wraps). */
  protected adoptGroupCheck(wrapped: Optimizer<O>): void {
    this.groupCheck = wrapped.groupCheck;
  }

  /** Restores hyperparameters and state (tensors are copied); group sizes must match. */
  loadStateDict(sd: OptimizerStateDict<O>): void {
    const byIndex = this.checkStateDict(sd);
    // copied before the old state goes: a state dict of this optimizer's own (stateDict() borrows
    // its tensors) was disposed by the load and the moments restarted from zero
    const copies = new Map<Tensor, ParamState>();
    for (const [i, s] of sd.state) {
      const copy: ParamState = {};
      for (const [k, v] of Object.entries(s)) copy[k] = v instanceof tf.Tensor ? v.clone() : v;
      copies.set(byIndex[i] as Tensor, copy);
    }
    this.clearState();
    for (const [p, copy] of copies) this.state.set(p, copy);
    this.assignLoadedHyperparameters(sd);
  }

  /** A loaded state dict's hyperparameters, copied into the groups as the constructor copies its options. */
  protected assignLoadedHyperparameters(sd: OptimizerStateDict<O>): void {
    for (const [gi, { params: _params, ...hyper }] of sd.paramGroups.entries())
      Object.assign(this.paramGroups[gi] as object, ownValues(hyper));
  }

  /** Frees the optimizer's state tensors. */
  dispose(): void {
    this.clearState();
  }

  /** Frees the state tensors (dispose, and a load: a subclass's own dispose() is not a load's business). */
  private clearState(): void {
    for (const s of this.state.values()) for (const v of Object.values(s)) if (v instanceof tf.Tensor) v.dispose();
    this.state.clear();
  }
}

/**
 * A hyperparameter as a group keeps it: an array (betas) copied and frozen, so changing one group's in place
 * is a TypeError, as on torch's tuple, not a change to every group sharing the defaults' array (probe BU).
 */
function ownValue(v: unknown): unknown {
  return Array.isArray(v) ? Object.freeze([...v]) : v;
}

function ownValues(o: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, ownValue(v)]));
}

function isGroupList<O>(params: Tensor[] | ParamGroupInput<O>[]): params is ParamGroupInput<O>[] {
  return params.length > 0 && Array.isArray((params[0] as { params?: unknown }).params);
}

/**
 * torch's `step(closure)` re-evaluates the loss inside step; ddp's optimizers take no closure, and
 * one passed where types are not checked (tsx) was ignored: the step ran on the gradients already
 * there, never the closure's.
 */
export function refuseStepArguments(where: string, args: unknown[]): void {
  if (args.length === 0) return;
  throw new OptimizerError(
    `${where}.step takes no argument (torch's step(closure) is not offered): run the forward and ` +
      'backward, then step()',
  );
}

/**
 * Refuses parameters an async operation not awaited still writes: `void loss.backward(); opt.step()`
 * (torch's backward is synchronous, ddp's returns a promise) stepped before the gradients were there;
 * a load not awaited overwrote the steps taken meanwhile; a save took the weights from before a
 * `join` loop still running; silently. `error` makes the package's own error (OptimizerError).
 */
export function refusePendingGradients(
  where: string,
  params: Iterable<Tensor>,
  error: (message: string) => Error = (message) => new OptimizerError(message),
): void {
  let i = 0;
  for (const p of params) {
    const writer = pendingWriter(p);
    if (writer !== null)
      throw error(
        `${where}: parameter ${i} is still being written by a running ${writer} (not awaited): ` +
          `await ${writer} before ${where}`,
      );
    i++;
  }
}

/** Refuses a freed parameter (see `freedParameterProblem`) before `where` would skip it. */
export function refuseFreedParameters(
  where: string,
  params: readonly Tensor[],
  since: string,
  which?: (i: number) => string,
): void {
  const problem = freedParameterProblem(params, since, which);
  if (problem !== null) throw new OptimizerError(`${where}: ${problem}`);
}

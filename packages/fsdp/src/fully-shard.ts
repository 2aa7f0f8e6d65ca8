import { isGradEnabled, queueCallback, Tensor, tidy, whileWriting, withSavedTensorHooks } from '@ddp/autograd';
import { groupOrWorld, type HalfDtype, type ProcessGroup } from '@ddp/comm';
import { type Module, type Parameter, Sequential, whileForwarding } from '@ddp/nn';
import { checkBooleanOptions, checkOptionNames, checkOptionValue } from '@ddp/tensor';
import { FSDPError, globalRank } from './errors.js';
import { FlatShard } from './flat-shard.js';
import { reduceInBackground } from './gradient-reduction.js';
import { checkSameStart, recordStart } from './same-start.js';
import { checkNoTieAcrossUnits } from './tied-parameters.js';
import { checkTrainableSet } from './trainable-set.js';
import { EnterUnit, LeaveUnit, type ShardedUnit } from './unit-functions.js';
import { type BackwardEndState, type UnitGradientState, withBackwardEnd } from './unreached-units.js';

export interface FullyShardOptions {
  /** Default: the world group. */
  /** null (what newGroup gives a rank outside the group) is refused. */
  processGroup?: ProcessGroup | null;
  /**
   * Free the unit's parameters after its forward and gather them again before its backward
   * (default true). A unit holding other units always keeps its own parameters from forward to
   * the end of backward (as FSDP2's root does).
   */
  reshardAfterForward?: boolean;
  /** Issue the next unit's all-gather while the current one computes (default true). */
  prefetch?: boolean;
  /** 'float16' / 'bfloat16': all-gathers and reduce-scatters send 2-byte values; math stays float32. */
  commDtype?: HalfDtype;
}

type UnitForward = (...inputs: unknown[]) => Tensor;

const unitOf = new WeakMap<Module, FSDPModule>();
/** Each sharded parameter's unit module. */
const sharded = new WeakMap<Tensor, Module>();

/** The running root forward: the last resharded unit that ran, for backward prefetch. */
let lastInForward: FSDPModule | null = null;

/**
 * One FSDP unit: `module` (and the part of its subtree not under another unit) with its own
 * parameters each held as a flat 1/N shard. Made by `fullyShard`; call `await forward(...)` on the
 * outermost one (the root).
 */
export class FSDPModule implements ShardedUnit, UnitGradientState {
  readonly processGroup: ProcessGroup;
  /** The unit's own parameters, flattened and sharded; null when it has none. */
  readonly flat: FlatShard | null;
  /** Every unit below this one in the module tree (not this one), in module order. */
  readonly subunits: FSDPModule[];
  readonly reshardAfterForward: boolean;
  readonly prefetch: boolean;
  private readonly innerForward: UnitForward;
  private requiresGradientSync = true;
  /** Set once a backward ran without gradient sync: from then on the root checks for units backward missed. */
  private trainedWithoutSync = false;
  reducedThisBackward = false;
  /** Gathered for backward, not reduced: no gradient reached its inputs (ids, a mask), so backward's end reduces. */
  awaitingReduce = false;
  private reduceQueued = false;
  /** This root's end-of-backward pass (withBackwardEnd), and the one of the root this unit last ran under. */
  private readonly ownBackwardEnd: BackwardEndState = { queued: false };
  private backwardEnd: BackwardEndState = this.ownBackwardEnd;
  /** The resharded unit that ran before this one in the last forward (prefetched in backward). */
  private previous: FSDPModule | null = null;

  constructor(
    readonly module: Module,
    opts: FullyShardOptions,
  ) {
    const known = ['processGroup', 'reshardAfterForward', 'prefetch', 'commDtype'];
    checkOptionNames('fullyShard', opts, known, (m) => new FSDPError(m));
    checkBooleanOptions('fullyShard', opts, ['reshardAfterForward', 'prefetch'], (m) => new FSDPError(m));
    // a value from a config ('float32', 'fp16') failed at the first forward with comm's error about arrays
    checkOptionValue('fullyShard', 'commDtype', opts.commDtype, ['float16', 'bfloat16'], (m) => new FSDPError(m));
    if (unitOf.has(module)) throw new FSDPError(`fullyShard: ${module.constructor.name} is sharded already`);
    this.processGroup = groupOrWorld(opts.processGroup, 'fullyShard');
    this.subunits = module
      .modules()
      .filter((m) => m !== module && unitOf.has(m))
      .map((m) => unitOf.get(m)!);
    this.reshardAfterForward = (opts.reshardAfterForward ?? true) && this.subunits.length === 0;
    this.prefetch = opts.prefetch ?? true;
    // frozen parameters stay whole on every rank (FSDP2 shards them too): the shards are cut once, here
    const trainable = module.parameters().filter((p) => p.requiresGrad);
    const under = new Set(this.subunits.flatMap((u) => u.flat?.params ?? []));
    const held = trainable.find((p) => sharded.has(p) && !under.has(p));
    const holder = held && sharded.get(held);
    // a unit holding this module was applied first (top-down), or another unit holds a weight tied to this one's
    if (holder)
      throw new FSDPError(
        holder.modules().includes(module)
          ? `fullyShard: ${module.constructor.name}'s parameters belong to an enclosing unit already; ` +
              'apply it bottom-up (inner units first)'
          : `fullyShard: ${module.constructor.name} shares a parameter with the unit ${holder.constructor.name} ` +
              '(tied weights): make the modules that share it one unit, or leave the shared module unsharded',
      );
    checkNoTieAcrossUnits(module, this.subunits, under);
    const own = trainable.filter((p) => !under.has(p));
    for (const p of own) sharded.set(p, module);
    recordStart(this, own); // before this rank keeps only its slice
    this.flat = own.length > 0 ? new FlatShard(own, this.processGroup, opts.commDtype) : null;
    // a backward not through the root's output (no end-of-backward pass) still reduces a kept unit
    if (this.flat && !this.reshardAfterForward) {
      for (const p of this.flat.params) p.registerPostAccumulateGradHook(() => this.queueReduce());
    }
    const forward = (module.forward as UnitForward).bind(module);
    this.innerForward = (...inputs) => {
      const out = forward(...inputs);
      if (out instanceof Promise) {
        out.catch(() => {}); // reported as the FSDPError below
        // an async forward (tensor-parallel layers, whose collectives run inside it) would run on
        // after the unit freed its parameters and left its saved-tensor hooks
        throw new FSDPError(
          `rank ${globalRank(this.processGroup)}: ${module.constructor.name}'s forward is async; a fullyShard unit's ` +
            'forward must be synchronous and return a Tensor (tensor-parallel modules cannot be units)',
        );
      }
      return out;
    };
    (module as unknown as { forward: UnitForward }).forward = (...inputs) => this.unitForward(inputs);
    unitOf.set(module, this);
  }

  /** The shards of this unit and every unit below it: what the optimizer steps. */
  parameters(): Parameter[] {
    return [this, ...this.subunits].flatMap((u) => u.flat?.shards ?? []);
  }

  /** Drops (or zeroes) the gradients of the shards and of the full parameters: torch's model.zero_grad(). */
  zeroGrad(setToNone = true): void {
    this.module.zeroGrad(setToNone);
  }

  /** The shard the optimizer steps for `param`, a parameter of this unit or one below (undefined: not sharded). */
  shardOf(param: Tensor): Parameter | undefined {
    for (const u of [this, ...this.subunits]) {
      const i = u.flat?.params.indexOf(param) ?? -1;
      if (i >= 0) return u.flat!.shards[i];
    }
    return undefined;
  }

  /**
   * FSDP2's set_requires_gradient_sync, for this unit and those below: false keeps the full
   * gradients (accumulating over backwards, no communication), true (default) reduce-scatters
   * them into the shards' gradients in the next backward.
   */
  setRequiresGradientSync(flag: boolean): void {
    checkBooleanOptions('setRequiresGradientSync', { flag }, ['flag'], (m) => new FSDPError(m));
    for (const u of [this, ...this.subunits]) {
      u.requiresGradientSync = flag;
      u.trainedWithoutSync ||= !flag;
    }
  }

  get syncsGradients(): boolean {
    return this.requiresGradientSync;
  }

  /**
   * Runs the module's forward with its units' parameters gathered. A root that is a Sequential
   * runs its children one by one, each unit's all-gather awaited just before it (the next one
   * prefetched), so only about two units are whole at a time; any other root gathers every unit
   * first (tfjs's forward is synchronous, so nothing can be awaited inside it).
   */
  async forward(...inputs: unknown[]): Promise<Tensor> {
    // an eval() before this is awaited is refused: the module would read its mode after the gathers
    const out = await whileForwarding(this.module, 'fullyShard', () => this.gatheredForward(inputs));
    const all = [this, ...this.subunits];
    const unreached = all.some((u) => u.trainedWithoutSync);
    if (!isGradEnabled() || !all.some((u) => u.flat)) return out;
    for (const u of all) u.backwardEnd = this.ownBackwardEnd;
    const ended = tidy(() => withBackwardEnd(out, all, this.processGroup, unreached, this.ownBackwardEnd));
    // the caller holds `ended`; `out`, left alive, kept the graph (activations, kept units' gathered
    // parameters) after the caller disposed theirs unbackwarded: a validation forward leaked (probe AV)
    out.dispose();
    return ended;
  }

  private async gatheredForward(inputs: unknown[]): Promise<Tensor> {
    checkTrainableSet(this.module, [this, ...this.subunits], globalRank(this.processGroup));
    await checkSameStart([this, ...this.subunits], this.processGroup);
    lastInForward = null;
    const all = [this, ...this.subunits];
    for (const u of all) u.flat?.free(); // a unit still whole from before an optimizer step is stale
    if (this.reshardAfterForward || !(this.module instanceof Sequential)) {
      await gatherAll(all);
      return tidy(() => this.module.forward(...(inputs as never[])) as Tensor);
    }
    await this.flat?.gather();
    const children = [...this.module];
    const unitsIn = (m: Module) => m.modules().flatMap((x) => (unitOf.has(x) ? [unitOf.get(x)!] : []));
    let h = inputs[0] as Tensor;
    for (const [i, child] of children.entries()) {
      await gatherAll(unitsIn(child));
      if (this.prefetch && i + 1 < children.length) for (const u of unitsIn(children[i + 1])) u.flat?.prefetch();
      const next = tidy(() => child.forward(h));
      if (i > 0 && next !== h) h.dispose(); // a child returning its input (an identity) keeps it
      h = next;
    }
    return h;
  }

  /**
   * Runs `fn` with every parameter of this unit and those below gathered (e.g. to read or save
   * the whole model), then frees them. Collective.
   */
  summonFullParams<T>(fn: () => T | Promise<T>): Promise<T> {
    // it writes the gathered values back into the shards: a step taken before it is awaited was undone
    return whileWriting(this.parameters(), 'summonFullParams()', 'values', async () => {
      const all = [this, ...this.subunits];
      for (const u of all) u.flat?.free(); // a unit still whole may be stale after an optimizer step
      await gatherAll(all, true); // float32 whatever the commDtype: what is read or exported is the shards' values
      try {
        const result = await fn();
        // what fn wrote (loadStateDict) goes into the shards, as torch's writeback (it was dropped silently);
        // compared across the ranks at the next forward (the same state loaded everywhere passes)
        for (const u of all) u.flat?.writeBack();
        for (const u of all) if (u.flat) recordStart(u, u.flat.params);
        return result;
      } finally {
        for (const u of all) u.flat?.free();
      }
    });
  }

  private unitForward(inputs: unknown[]): Tensor {
    if (this.flat && !this.flat.isGathered) {
      throw new FSDPError(
        `rank ${globalRank(this.processGroup)}: ${this.module.constructor.name}'s parameters are not gathered; ` +
          'run the model through `await root.forward(...)` of the outermost fullyShard unit; a unit called ' +
          'twice in one forward needs fullyShard(…, { reshardAfterForward: false }) (it frees its parameters ' +
          'after each call)',
      );
    }
    if (!this.reshardAfterForward || !this.flat) return this.innerForward(...inputs);
    if (!isGradEnabled()) {
      const out = this.innerForward(...inputs);
      this.flat.free();
      return out;
    }
    this.previous = lastInForward;
    lastInForward = this;
    const flat = this.flat;
    return tidy(() => {
      // the tensors among the inputs enter (an optional argument left undefined, a number, stay as they are)
      const entered = EnterUnit.apply<Tensor[]>(this, flat.shards[0], ...inputs.filter((x) => x instanceof Tensor));
      let k = 0;
      const args = inputs.map((x) => (x instanceof Tensor ? entered[k++] : x));
      // recorded (activations kept), the parameters saved by reference: freed here, gathered again for backward
      const out = withSavedTensorHooks(flat.savedParameterHooks, () => this.innerForward(...args));
      flat.free();
      return LeaveUnit.apply(this, out);
    });
  }

  async gatherForBackward(): Promise<void> {
    this.awaitingReduce = true;
    const gathering = this.flat!.gather();
    if (this.prefetch) this.previous?.flat?.prefetch();
    await gathering;
  }

  /**
   * The unit's backward is done: its gradients' reduce-scatter starts (the shards' gradients
   * arrive when backward ends), its parameters are freed. Under no-sync the full gradients stay.
   */
  async finishBackward(): Promise<void> {
    const flat = this.flat!;
    this.awaitingReduce = false;
    const reducing = this.requiresGradientSync ? reduceInBackground(flat) : null;
    this.reducedThisBackward ||= this.requiresGradientSync;
    flat.free();
    await reducing;
  }

  /**
   * A unit that keeps its parameters through backward reduces its gradients once backward is done:
   * in the root's end-of-backward pass, or, in a backward that does not pass the root's output, here.
   */
  private queueReduce(): void {
    if (this.reduceQueued || this.backwardEnd.queued) return;
    this.reduceQueued = true;
    queueCallback(async () => {
      this.reduceQueued = false;
      await this.finishBackward();
    });
  }
}

const gatherAll = (units: FSDPModule[], float32 = false) => Promise.all(units.map((u) => u.flat?.gather(float32)));

/**
 * FSDP2's fully_shard: shards each of `module`'s parameters (those not already under an inner unit)
 * as a flat 1/N shard per rank. Apply it per block first, then to the root; train through the root's
 * `await forward(...)` and an optimizer over the root's `parameters()` (the shards).
 */
export function fullyShard(module: Module, opts: FullyShardOptions = {}): FSDPModule {
  return new FSDPModule(module, opts);
}

import { pendingWriter, Tensor } from '@ddp/autograd';
import { checkBooleanOptions, tf } from '@ddp/tensor';
import { kindOf, ModuleError, refuseStateBeingWritten, StateDictError } from './module-errors.js';
import { adoptAssignedFields, warnUnregisteredFields } from './module-fields.js';
import { Parameter } from './parameter.js';
import { refuseDuringForward } from './running-forward.js';
import { shardOf } from './sharded-gradients.js';
import { incomingState } from './state-dict-input.js';

/** Module state by dotted name. Values are borrowed: clone what you keep, never dispose them. */
export type StateDict = Map<string, tf.Tensor>;

export { kindOf, ModuleError, StateDictError };

const NAME = /^[^.]+$/;

/**
 * Base class of layers and models (torch.nn.Module). Parameters, buffers and children are
 * kept in registration order, which every rank shares, so DDP can bucket by it.
 */
export abstract class Module {
  training = true;
  private readonly params = new Map<string, Parameter | null>();
  private readonly bufs = new Map<string, Tensor | null>();
  private readonly nonPersistent = new Set<string>();
  private readonly children_ = new Map<string, Module | null>();

  abstract forward(...inputs: never[]): unknown;

  private checkName(name: string): void {
    if (!NAME.test(name)) throw new ModuleError(`bad attribute name '${name}': it may not be empty or contain '.'`);
    if (this.params.has(name) || this.bufs.has(name) || this.children_.has(name)) {
      throw new ModuleError(`'${name}' is already registered on ${this.constructor.name}`);
    }
  }

  registerParameter<P extends Parameter | null>(name: string, param: P): P {
    this.checkName(name);
    // a raw tf.Tensor was taken, then stateDict() held its methods and saveCheckpoint failed untyped
    if (param !== null && !(param instanceof Parameter))
      throw new ModuleError(`registerParameter('${name}'): expected a Parameter or null, got ${kindOf(param)}`);
    this.params.set(name, param);
    return param;
  }

  /** A buffer is state that is not trained (running statistics); persistent ones are in stateDict. */
  registerBuffer<T extends Tensor | null>(name: string, tensor: T, persistent = true): T {
    this.checkName(name);
    if (tensor !== null && !(tensor instanceof Tensor))
      throw new ModuleError(
        `registerBuffer('${name}'): expected a Tensor (new Tensor(t)) or null, got ${kindOf(tensor)}`,
      );
    this.bufs.set(name, tensor);
    if (!persistent) this.nonPersistent.add(name);
    return tensor;
  }

  registerModule<M extends Module | null>(name: string, module: M): M {
    this.checkName(name);
    if (module !== null && !(module instanceof Module))
      throw new ModuleError(`registerModule('${name}'): expected a Module or null, got ${kindOf(module)}`);
    this.children_.set(name, module);
    return module;
  }

  /**
   * Puts `module` in place of the child registered as `name` (PyTorch's setattr on a submodule),
   * keeping its place in registration order, and points this module's own fields and array
   * slots (ModuleList's items) that held the old child at the new one. Returns the old child,
   * which the caller disposes or reuses. A child registered under several names keeps its other
   * fields until the last of its names is replaced (the field named `name` follows at once).
   */
  replaceModule(name: string, module: Module | null): Module | null {
    if (!this.children_.has(name)) throw new ModuleError(`no child module '${name}' on ${this.constructor.name}`);
    const old = this.children_.get(name)!;
    this.children_.set(name, module);
    const slots = this as unknown as Record<string, unknown>;
    // the field of that name follows (torch's setattr): it kept the old module while another name held it (probe AX)
    if (Object.hasOwn(this, name) && slots[name] === old) slots[name] = module;
    if (old === null || old === module || [...this.children_.values()].includes(old)) return old;
    for (const [key, value] of Object.entries(slots)) {
      if (value === old) slots[key] = module;
      else if (Array.isArray(value)) for (const [i, v] of value.entries()) if (v === old) value[i] = module;
    }
    return old;
  }

  /**
   * Puts `param` in place of the parameter registered as `name` (PyTorch's setattr on a
   * parameter), disposing the old one: a layer built from another keeps its parameters
   * themselves, which optimizers made before may hold.
   */
  protected replaceParameter(name: string, param: Parameter | null): void {
    if (!this.params.has(name)) throw new ModuleError(`no parameter '${name}' on ${this.constructor.name}`);
    const old = this.params.get(name);
    if (old && old !== param) old.dispose();
    this.params.set(name, param);
    const fields = this as unknown as Record<string, unknown>;
    if (Object.hasOwn(this, name) && fields[name] === old) fields[name] = param;
  }

  /** torch's setattr on a registered name, at each traversal (module-fields.ts). */
  private adoptAssignedFields(): void {
    adoptAssignedFields(this, this.children_, this.params, this.bufs);
  }

  /** Replaces a registered buffer's tensor (e.g. a running mean after an update), disposing the old one. */
  protected setBuffer(name: string, tensor: Tensor): void {
    if (!this.bufs.has(name)) throw new ModuleError(`no buffer '${name}' on ${this.constructor.name}`);
    const old = this.bufs.get(name);
    if (old && old !== tensor) old.dispose();
    this.bufs.set(name, tensor);
  }

  protected getBuffer(name: string): Tensor {
    const t = this.bufs.get(name);
    if (!t) throw new ModuleError(`buffer '${name}' of ${this.constructor.name} is not set`);
    return t;
  }

  /**
   * Direct children by name; a child registered under several names is listed under its first
   * only (torch's named_children), so apply() reaches it once (it ran fn on it once per name).
   */
  *namedChildren(): Generator<[string, Module]> {
    this.adoptAssignedFields();
    const seen = new Set<Module>();
    for (const [name, m] of this.children_) {
      if (!m || seen.has(m)) continue;
      seen.add(m);
      yield [name, m];
    }
  }

  children(): Module[] {
    return [...this.namedChildren()].map(([, m]) => m);
  }

  /** This module and every descendant, depth first, each once. */
  *namedModules(prefix = '', seen = new Set<Module>()): Generator<[string, Module]> {
    if (seen.has(this)) return;
    seen.add(this);
    const children = [...this.namedChildren()]; // fields assigned since are taken over first
    warnUnregisteredFields(this, (v) => [...this.params.values(), ...this.children_.values()].includes(v as never));
    yield [prefix, this];
    for (const [name, m] of children) yield* m.namedModules(prefix ? `${prefix}.${name}` : name, seen);
  }

  modules(): Module[] {
    return [...this.namedModules()].map(([, m]) => m);
  }

  /** Parameters by dotted name in registration order; a shared parameter is listed once. */
  namedParameters(recurse = true): [string, Parameter][] {
    return this.named(recurse, (m) => m.params);
  }

  parameters(recurse = true): Parameter[] {
    return this.namedParameters(recurse).map(([, p]) => p);
  }

  namedBuffers(recurse = true, persistentOnly = false): [string, Tensor][] {
    return this.named(recurse, (m) => [...m.bufs].filter(([name]) => !(persistentOnly && m.nonPersistent.has(name))));
  }

  /** Each tensor once, under the first name it is reached by (torch's; a shared buffer was listed twice). */
  private named<T>(recurse: boolean, own: (m: Module) => Iterable<[string, T | null]>): [string, T][] {
    const out: [string, T][] = [];
    const seen = new Set<T>();
    if (!recurse) this.adoptAssignedFields();
    for (const [prefix, m] of recurse ? this.namedModules() : [['', this] as [string, Module]]) {
      for (const [name, t] of own(m)) {
        if (!t || seen.has(t)) continue;
        seen.add(t);
        out.push([prefix ? `${prefix}.${name}` : name, t]);
      }
    }
    return out;
  }

  buffers(recurse = true): Tensor[] {
    return this.namedBuffers(recurse).map(([, b]) => b);
  }

  train(mode = true): this {
    // torch raises too: 'false' was truthy, and the model trained (dropout on) where eval was meant
    checkBooleanOptions('Module.train', { mode }, ['mode'], (message) => new ModuleError(message));
    refuseDuringForward(this.modules(), `${this.constructor.name}.${mode ? 'train()' : 'eval()'}`);
    for (const m of this.modules()) m.training = mode;
    return this;
  }

  eval(): this {
    return this.train(false);
  }

  /** Sets requiresGrad on every parameter (torch's requires_grad_: freezing a module); returns this. */
  requiresGrad_(requiresGrad = true): this {
    checkBooleanOptions('Module.requiresGrad_', { requiresGrad }, ['requiresGrad'], (m) => new ModuleError(m));
    for (const p of this.parameters()) p.requiresGrad = requiresGrad;
    return this;
  }

  /** Calls fn on every descendant, then on this module (torch's order). */
  apply(fn: (m: Module) => void): this {
    for (const child of this.children()) child.apply(fn);
    fn(this);
    return this;
  }

  /** Drops every parameter's gradient (setToNone) or zeroes it in place; a sharded one's shard's too. */
  zeroGrad(setToNone = true): void {
    const params = this.parameters().flatMap((p) => [p, shardOf(p) ?? []].flat());
    const busy = params.find((p) => pendingWriter(p) !== null); // a backward not awaited
    if (busy) throw new ModuleError(`zeroGrad(): ${pendingWriter(busy)} still runs (not awaited): await it first`);
    for (const p of params) {
      if (p.grad === null) continue;
      p.grad = setToNone ? null : tf.zerosLike(p.grad);
    }
  }

  /**
   * Parameters and persistent buffers by dotted name, in registration order (borrowed). A module
   * registered under two names has its tensors under both, as torch's state_dict (it had them
   * under the first only, and torch's strict load of the file failed).
   */
  stateDict(): StateDict {
    const state = [...this.stateTensors()];
    refuseStateBeingWritten(`${this.constructor.name}.stateDict()`, state);
    return new Map(state.map(([key, t]) => [key, t.data]));
  }

  /** Every parameter and persistent buffer by dotted name, a shared module under each of its names. */
  private *stateTensors(prefix = '', ancestors = new Set<Module>()): Generator<[string, Tensor]> {
    if (ancestors.has(this)) return; // a module inside itself: no end to its names
    this.adoptAssignedFields();
    const key = (name: string) => (prefix ? `${prefix}.${name}` : name);
    for (const [name, p] of this.params) if (p) yield [key(name), p];
    for (const [name, b] of this.bufs) if (b && !this.nonPersistent.has(name)) yield [key(name), b];
    ancestors.add(this);
    for (const [name, m] of this.children_) if (m) yield* m.stateTensors(key(name), ancestors);
    ancestors.delete(this);
  }

  /**
   * Copies `state` into the parameters and persistent buffers. Shapes must match; with
   * `strict` (default) the keys must match too. Throws StateDictError naming every problem
   * before changing anything.
   */
  loadStateDict(
    state: StateDict | Record<string, tf.Tensor | Tensor>,
    strict = true,
  ): { missingKeys: string[]; unexpectedKeys: string[] } {
    refuseDuringForward(this.modules(), `${this.constructor.name}.loadStateDict`);
    const incoming = incomingState(state);
    const { targets, missingKeys, unexpectedKeys } = this.checkStateDict(incoming, strict);
    // every copy made before any is assigned: assigning disposes a target's old data, which the
    // incoming map may hold for another name (a model's own state dict, tied weights: TypeError)
    const copies = [...targets].flatMap(([k, t]) => {
      const v = incoming.get(k);
      return v ? [[t, tf.cast(v, t.dtype)] as const] : []; // cast gives a fresh copy the target owns
    });
    for (const [t, copy] of copies) t.data = copy;
    return { missingKeys, unexpectedKeys };
  }

  /** loadStateDict's refusals without loading. Checkpoint loads check the model first (probe BD: a whole model
   * loaded into a pipeline stage failed on the optimizer's parameter count or order, differently per rank). */
  checkStateDict(
    state: StateDict | Record<string, tf.Tensor | Tensor>,
    strict = true,
  ): { targets: Map<string, Tensor>; missingKeys: string[]; unexpectedKeys: string[] } {
    const incoming = incomingState(state);
    const targets = new Map(this.stateTensors());
    refuseStateBeingWritten(`${this.constructor.name}.loadStateDict()`, targets);
    // a shared tensor is loaded through any of its names (files saved before held only the first)
    const loaded = new Set([...targets].filter(([k]) => incoming.has(k)).map(([, t]) => t));
    const missingKeys = [...targets].filter(([k, t]) => !incoming.has(k) && !loaded.has(t)).map(([k]) => k);
    const unexpectedKeys = [...incoming.keys()].filter((k) => !targets.has(k));
    const shapeMismatches: string[] = [];
    for (const [k, t] of targets) {
      const v = incoming.get(k);
      if (v && (v.shape.length !== t.shape.length || v.shape.some((d, i) => d !== t.shape[i]))) {
        shapeMismatches.push(`${k}: checkpoint [${v.shape.join(', ')}], model [${t.shape.join(', ')}]`);
      }
    }
    if (shapeMismatches.length || (strict && (missingKeys.length || unexpectedKeys.length))) {
      throw new StateDictError(strict ? missingKeys : [], strict ? unexpectedKeys : [], shapeMismatches);
    }
    return { targets, missingKeys, unexpectedKeys };
  }

  /** Frees every parameter and buffer of this module and its descendants. */
  dispose(): void {
    for (const p of this.parameters()) p.dispose();
    for (const b of this.buffers()) b.dispose();
  }
}

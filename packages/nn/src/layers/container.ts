import type { Tensor } from '@ddp/autograd';
import { Module, ModuleError } from '../module.js';

/** A module whose forward maps a single tensor to a single tensor. */
export type TensorModule = Module & { forward(x: Tensor): Tensor };

/** A list of registered submodules (nn.ModuleList); it has no forward of its own. */
export class ModuleList<M extends Module = Module> extends Module {
  private readonly items: M[] = [];
  constructor(modules: Iterable<M> = []) {
    super();
    for (const m of modules) this.append(m);
  }
  append(m: M): this {
    this.items.push(this.registerModule(String(this.items.length), m));
    return this;
  }
  get length(): number {
    return this.items.length;
  }
  at(i: number): M {
    const m = this.items.at(i);
    if (!m) throw new ModuleError(`${this.constructor.name} has ${this.items.length} modules, no index ${i}`);
    return m;
  }
  /** Also the item at that index (`seq[0] = m` is taken over the same way, at the next traversal). */
  override replaceModule(name: string, module: Module | null): Module | null {
    if (module === null) throw new ModuleError(`${this.constructor.name}[${name}]: an item cannot be null`);
    const old = super.replaceModule(name, module);
    const i = Number(name);
    if (Number.isInteger(i) && this.items[i] === old) this.items[i] = module as M;
    return old;
  }
  [Symbol.iterator](): Iterator<M> {
    return this.items[Symbol.iterator]();
  }
  forward(..._inputs: never[]): unknown {
    throw new ModuleError(`${this.constructor.name} has no forward; iterate over its modules`);
  }
}

/** Runs its children in order (nn.Sequential); children are named '0', '1', … */
export class Sequential extends ModuleList<TensorModule> {
  constructor(...layers: TensorModule[]) {
    super(layers);
  }
  override forward(x: Tensor): Tensor {
    return [...this].reduce((h, layer) => layer.forward(h), x);
  }
}

/** Submodules by name (nn.ModuleDict), in insertion order; it has no forward of its own. */
export class ModuleDict<M extends Module = Module> extends Module {
  private readonly items = new Map<string, M>();
  constructor(modules: Record<string, M> | Iterable<[string, M]> = {}) {
    super();
    for (const [key, m] of Symbol.iterator in modules ? modules : Object.entries(modules)) this.set(key, m);
  }
  /** Adds `m` under `key`, or puts it in place of the module there (torch's `d[key] = m`). */
  set(key: string, m: M): this {
    // torch refuses a key that is an attribute too ('training', 'forward'): here it would shadow a field
    if (!this.items.has(key) && key in this)
      throw new ModuleError(`${this.constructor.name}: '${key}' is an attribute of the dict; use another key`);
    if (this.items.has(key)) this.replaceModule(key, m);
    else this.registerModule(key, m);
    this.items.set(key, m);
    return this;
  }
  get(key: string): M {
    const m = this.items.get(key);
    if (!m) throw new ModuleError(`${this.constructor.name} has no module '${key}' (it has ${[...this.items.keys()]})`);
    return m;
  }
  has(key: string): boolean {
    return this.items.has(key);
  }
  get size(): number {
    return this.items.size;
  }
  keys(): IterableIterator<string> {
    return this.items.keys();
  }
  values(): IterableIterator<M> {
    return this.items.values();
  }
  entries(): IterableIterator<[string, M]> {
    return this.items.entries();
  }
  /** Keeps `get` in step with a module put in place by name (replaceModule, convertSyncBatchnorm). */
  override replaceModule(name: string, module: Module | null): Module | null {
    if (module === null) throw new ModuleError(`${this.constructor.name}['${name}']: a module cannot be null`);
    const old = super.replaceModule(name, module);
    this.items.set(name, module as M);
    return old;
  }
  forward(..._inputs: never[]): unknown {
    throw new ModuleError(`${this.constructor.name} has no forward; look its modules up by name`);
  }
}

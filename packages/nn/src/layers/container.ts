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

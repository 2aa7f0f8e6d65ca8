/** A module's fields against what it registered: torch registers whatever is assigned to an attribute. */
import { Tensor } from '@ddp/autograd';
import { Module } from './module.js';
import { kindOf, ModuleError } from './module-errors.js';
import { Parameter } from './parameter.js';

/** Each module's own field count when last looked at, and the fields warned about. */
const looked = new WeakMap<Module, { keys: number; warned: Set<string> }>();

/**
 * torch registers every Module or Parameter assigned to an attribute; here a plain field
 * (`head = new Linear(4, 1)`) is no child: its parameters were missing from parameters(),
 * stateDict() and DDP, eval() missed its dropout, silently. Said once per field, at the first
 * traversal, and again once fields were added (a traversal costs one key count otherwise), for a
 * module or parameter that is nowhere under this module.
 */
export function warnUnregisteredFields(m: Module, registered: (v: unknown) => boolean): void {
  const keys = Object.keys(m).length;
  const last = looked.get(m);
  if (last?.keys === keys) return;
  const warned = last?.warned ?? new Set<string>();
  looked.set(m, { keys, warned });
  const stray = Object.entries(m).filter(
    ([field, v]) => (v instanceof Module || v instanceof Parameter) && !warned.has(field) && !registered(v),
  );
  if (stray.length === 0) return;
  const under = new Set<unknown>();
  for (const [, d] of m.namedModules('', new Set())) {
    under.add(d);
    for (const [, p] of d.namedParameters(false)) under.add(p);
  }
  for (const [field, v] of stray.filter(([, v]) => !under.has(v))) {
    warned.add(field);
    const [what, register] =
      v instanceof Module ? [`a ${kindOf(v)}`, 'registerModule'] : ['a Parameter', 'registerParameter'];
    process.emitWarning(
      `${m.constructor.name}.${field} holds ${what} that is not registered: it is not in parameters(), ` +
        `stateDict() or train()/eval() (torch registers attributes itself; here call this.${register}('${field}', …))`,
      { code: 'DDP_UNREGISTERED_FIELD' },
    );
  }
}

/**
 * torch's setattr on a registered name: a field assigned afterwards (`model.fc = new Linear(…)`,
 * `lin.bias = null`, `seq[0] = …`) is what forward uses, and parameters(), stateDict(), train() and
 * checkpoints kept the old one, silently (probe AX). Taken over at each traversal; a value of
 * another kind is refused, as torch's setattr refuses it.
 */
export function adoptAssignedFields(
  m: Module,
  children: Map<string, Module | null>,
  params: Map<string, Parameter | null>,
  bufs: Map<string, Tensor | null>,
): void {
  const fields = m as unknown as Record<string, unknown>;
  const assigned = (name: string, registered: unknown) =>
    Object.hasOwn(m, name) && fields[name] !== undefined && fields[name] !== registered;
  const refuse = (name: string, kind: string) => {
    throw new ModuleError(
      `${m.constructor.name}.${name} is a registered ${kind}: cannot assign ${kindOf(fields[name])} to it ` +
        `(a ${kind === 'parameter' ? 'Parameter' : 'Module'} or null)`,
    );
  };
  for (const [name, child] of children) {
    if (!assigned(name, child)) continue;
    const v = fields[name];
    if (v !== null && !(v instanceof Module)) refuse(name, 'module');
    m.replaceModule(name, v as Module | null);
  }
  for (const [name, p] of params) {
    if (!assigned(name, p)) continue;
    const v = fields[name];
    if (v !== null && !(v instanceof Parameter)) refuse(name, 'parameter');
    params.set(name, v as Parameter | null); // the old one may be an optimizer's still: not disposed
  }
  for (const [name, b] of bufs) {
    const v = fields[name];
    if (assigned(name, b) && (v === null || v instanceof Tensor)) bufs.set(name, v);
  }
}

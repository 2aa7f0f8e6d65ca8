import type { Tensor } from '@ddp/autograd';
import type { Module } from '@ddp/nn';
import { FSDPError } from './errors.js';

/**
 * Refuses a parameter of a unit below `module` (`under`) that one of `module`'s own modules (not
 * inside a subunit) also holds: tied weights across a unit boundary, as an embedding in the root
 * tied to an LM head that is a unit. The subunit reduce-scatters its gradient in its backward,
 * before the root's use adds its part, which stayed on the full parameter and arrived a step
 * late: wrong gradients without an error.
 */
export function checkNoTieAcrossUnits(
  module: Module,
  subunits: readonly { module: Module }[],
  under: ReadonlySet<Tensor>,
): void {
  const units = new Set(subunits.map((u) => u.module));
  // walked from the top, stopping at units: a module shared by a unit and a parent outside it is reached
  // outside too (listed once, as inside the unit, it slipped through and failed in the first forward)
  const seen = new Set<Module>(); // once per module outside the units (a module holding itself, diamonds)
  const outside = (m: Module): Module | undefined => {
    if (units.has(m) || seen.has(m)) return undefined;
    seen.add(m);
    if (m.parameters(false).some((p) => under.has(p))) return m;
    for (const [, child] of m.namedChildren()) {
      const found = outside(child);
      if (found) return found;
    }
    return undefined;
  };
  const tied = outside(module);
  if (!tied) return;
  throw new FSDPError(
    `fullyShard: ${tied.constructor.name} shares a parameter with a unit below ${module.constructor.name} ` +
      '(tied weights): make the modules that share it one unit, or leave the shared module unsharded',
  );
}

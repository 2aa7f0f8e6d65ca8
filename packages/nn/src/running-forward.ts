import { AsyncLocalStorage } from 'node:async_hooks';
import { ModuleError } from './module-errors.js';

/**
 * ddp's forwards that communicate are async, torch's are not, so a script may call eval() or
 * loadStateDict before awaiting one: the rest of that forward then ran in the other mode (dropout
 * off halfway, SyncBatchNorm's statistics not tracked) or with other weights, silently. Such a
 * forward marks its module and every descendant while it runs; changing a marked module refuses.
 */
const running = new WeakMap<object, { count: number; owner: string }>();
/** Inside one of those forwards: its own changes (a teacher put in eval mode) are its business, as in torch. */
const insideForward = new AsyncLocalStorage<true>();

interface ModuleTree {
  modules(): object[];
}

/** Runs `forward` with `module`'s tree marked as in a forward of `owner`. */
export async function whileForwarding<T>(module: ModuleTree, owner: string, forward: () => Promise<T>): Promise<T> {
  const tree = module.modules();
  for (const m of tree) {
    const mark = running.get(m);
    if (mark) mark.count++;
    else running.set(m, { count: 1, owner });
  }
  try {
    return await insideForward.run(true, forward);
  } finally {
    for (const m of tree) {
      const mark = running.get(m)!;
      if (--mark.count === 0) running.delete(m);
    }
  }
}

/** Throws ModuleError when one of `modules` is inside a running forward; `what` names the change. */
export function refuseDuringForward(modules: object[], what: string): void {
  if (insideForward.getStore()) return;
  const mark = modules.map((m) => running.get(m)).find((m) => m !== undefined);
  if (mark)
    throw new ModuleError(
      `${what} while ${mark.owner}'s forward still runs (not awaited): await it first; ` +
        'the rest of that forward would run with the change',
    );
}

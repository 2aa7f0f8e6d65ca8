import { AsyncLocalStorage } from 'node:async_hooks';
import { AutogradError } from './errors.js';
import type { Tensor } from './tensor.js';

type Callback = () => void | Promise<void>;

/** What a running backward() knows of itself, for the hooks and Functions it calls. */
export interface BackwardRun {
  callbacks: Callback[];
  pending: Promise<void>[];
  /** The backward this one runs inside (checkpoint's recomputation), if any. */
  parent: BackwardRun | undefined;
}

// The backward a hook or Function runs under; async-context local, so concurrent backwards
// (several simulated ranks in one process) keep their callbacks apart.
const currentRun = new AsyncLocalStorage<BackwardRun>();

/** Leaves whose gradient a running backward() still writes, with how many backwards do. */
const filling = new Map<Tensor, number>();

/**
 * True when a backward() still running writes `t`'s gradient and the caller is not part of it
 * (a hook or callback of that backward may step or read it, as torch's optimizer-in-backward does).
 * `void loss.backward(); opt.step()` (torch's habit: its backward is synchronous) stepped
 * gradients not yet there: nothing, or half a step, silently.
 */
export function gradientPending(t: Tensor): boolean {
  return filling.has(t) && currentRun.getStore() === undefined;
}

/**
 * Queues fn to run once the outermost running backward() has processed every node (and
 * awaited the promises returned by post-accumulate hooks), like queue_callback in PyTorch.
 */
export function queueCallback(fn: Callback): void {
  let run = currentRun.getStore();
  if (run === undefined) throw new AutogradError('queueCallback() can only be called during backward()');
  while (run.parent !== undefined) run = run.parent;
  run.callbacks.push(fn);
}

/**
 * Runs a backward over `leaves` (the tensors whose gradients it writes) as the current run: its
 * hooks and Functions see it (queueCallback), and gradientPending sees the leaves until it ends.
 */
export async function runBackward(leaves: Tensor[], execute: (run: BackwardRun) => Promise<void>): Promise<void> {
  const run: BackwardRun = { callbacks: [], pending: [], parent: currentRun.getStore() };
  for (const t of leaves) filling.set(t, (filling.get(t) ?? 0) + 1);
  try {
    await currentRun.run(run, () => execute(run));
  } finally {
    for (const t of leaves) {
      const left = filling.get(t)! - 1;
      if (left === 0) filling.delete(t);
      else filling.set(t, left);
    }
  }
}

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

/**
 * Tensors an async operation still writes (their values or gradients), with what writes them: a
 * running backward() its leaves' gradients, a load their values, a distributed clip or step both.
 */
const writers = new Map<Tensor, string[]>();
/** Inside one of those operations (its own steps and reads are its business). */
const insideWriter = new AsyncLocalStorage<true>();

/**
 * What still writes `t` (`loss.backward()`, `loadCheckpoint()`, …), seen by a caller that is not part
 * of it (a hook or callback of a running backward may step or read it, as torch's optimizer-in-backward
 * does), or null. `void loss.backward(); opt.step()` (torch's habit: its backward is synchronous) stepped
 * gradients not yet there; a load not awaited overwrote the steps taken meanwhile: silently.
 */
export function pendingWriter(t: Tensor): string | null {
  const what = writers.get(t)?.[0]; // the outermost: what the caller called
  if (what === undefined || currentRun.getStore() !== undefined || insideWriter.getStore()) return null;
  return what;
}

/** Runs `fn` (an async operation writing `tensors`, named `what` for messages) with them marked as written. */
export async function whileWriting<T>(tensors: Iterable<Tensor>, what: string, fn: () => Promise<T>): Promise<T> {
  const held = mark(tensors, what);
  try {
    return await insideWriter.run(true, fn);
  } finally {
    unmark(held, what);
  }
}

function mark(tensors: Iterable<Tensor>, what: string): Tensor[] {
  const held = [...new Set(tensors)];
  for (const t of held) writers.set(t, [...(writers.get(t) ?? []), what]);
  return held;
}

function unmark(held: Tensor[], what: string): void {
  for (const t of held) {
    const left = writers.get(t)!;
    left.splice(left.lastIndexOf(what), 1);
    if (left.length === 0) writers.delete(t);
  }
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
 * hooks and Functions see it (queueCallback), and pendingWriter sees the leaves until it ends.
 */
export async function runBackward(leaves: Tensor[], execute: (run: BackwardRun) => Promise<void>): Promise<void> {
  const run: BackwardRun = { callbacks: [], pending: [], parent: currentRun.getStore() };
  const held = mark(leaves, 'loss.backward()');
  try {
    await currentRun.run(run, () => execute(run));
  } finally {
    unmark(held, 'loss.backward()');
  }
}

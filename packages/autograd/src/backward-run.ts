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

/** What an async operation writes of a tensor: its values (a step, a load) or only its gradient (a backward). */
export type Writes = 'values' | 'gradients';

/**
 * Tensors an async operation still writes (their values or gradients), with what writes them: a
 * running backward() its leaves' gradients, a load their values, a distributed clip or step both.
 */
const writers = new Map<Tensor, { what: string; writes: Writes }[]>();
/** Inside one of those operations (its own steps and reads are its business). */
const insideWriter = new AsyncLocalStorage<true>();

function outsideWriters(): boolean {
  return currentRun.getStore() === undefined && !insideWriter.getStore();
}

/**
 * What still writes `t` (`loss.backward()`, `loadCheckpoint()`, …), seen by a caller that is not part
 * of it (a hook or callback of a running backward may step or read it, as torch's optimizer-in-backward
 * does), or null. `void loss.backward(); opt.step()` (torch's habit: its backward is synchronous) stepped
 * gradients not yet there; a load not awaited overwrote the steps taken meanwhile: silently.
 */
export function pendingWriter(t: Tensor): string | null {
  const what = writers.get(t)?.[0]?.what; // the outermost: what the caller called
  return what !== undefined && outsideWriters() ? what : null;
}

/**
 * What still writes `t`'s values (a step, a load, `join`'s loop; not a backward, which writes its
 * gradient only), seen from outside it, or null: what reads the values now reads those of before.
 */
export function pendingValueWriter(t: Tensor): string | null {
  if (writers.size === 0) return null; // every op asks: the common case costs one comparison
  const what = writers.get(t)?.find((w) => w.writes === 'values')?.what;
  return what !== undefined && outsideWriters() ? what : null;
}

/**
 * Refuses an op's argument whose values an async operation not awaited still writes (`void opt.step()`,
 * a `join` loop, a load, then a forward): the op read the values of before, silently.
 */
export function refuseValuesBeingWritten(op: string, args: readonly unknown[]): void {
  if (writers.size === 0) return;
  for (const [i, a] of args.entries()) {
    const writer = writers.has(a as Tensor) ? pendingValueWriter(a as Tensor) : null;
    if (writer !== null)
      throw new AutogradError(
        `${op}: argument ${i} is still being written by a running ${writer} (not awaited), ` +
          `so this would read its values of before: await ${writer} first`,
      );
  }
}

/**
 * Runs `fn` (an async operation writing `tensors`' values or only their gradients, named `what` for
 * messages) with them marked as written.
 */
export async function whileWriting<T>(
  tensors: Iterable<Tensor>,
  what: string,
  writes: Writes,
  fn: () => Promise<T>,
): Promise<T> {
  const held = mark(tensors, what, writes);
  try {
    return await insideWriter.run(true, fn);
  } finally {
    unmark(held, what);
  }
}

function mark(tensors: Iterable<Tensor>, what: string, writes: Writes): Tensor[] {
  const held = [...new Set(tensors)];
  for (const t of held) writers.set(t, [...(writers.get(t) ?? []), { what, writes }]);
  return held;
}

function unmark(held: Tensor[], what: string): void {
  for (const t of held) {
    const left = writers.get(t)!;
    left.splice(left.map((w) => w.what).lastIndexOf(what), 1);
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
 * The outermost running backward() as an identity (null outside one): hooks tell one backward
 * from the next, e.g. to keep a failure for the rest of the backward it happened in.
 */
export function currentBackward(): object | null {
  let run = currentRun.getStore();
  if (run === undefined) return null;
  while (run.parent !== undefined) run = run.parent;
  return run;
}

/**
 * Runs a backward over `leaves` (the tensors whose gradients it writes) as the current run: its
 * hooks and Functions see it (queueCallback), and pendingWriter sees the leaves until it ends.
 */
export async function runBackward(leaves: Tensor[], execute: (run: BackwardRun) => Promise<void>): Promise<void> {
  const run: BackwardRun = { callbacks: [], pending: [], parent: currentRun.getStore() };
  const held = mark(leaves, 'loss.backward()', 'gradients');
  try {
    await currentRun.run(run, () => execute(run));
  } finally {
    unmark(held, 'loss.backward()');
  }
}

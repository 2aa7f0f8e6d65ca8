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
const writers = new Map<Tensor, Writer[]>();
interface Writer {
  what: string;
  writes: Writes;
  id: symbol;
}
/**
 * The operations this code runs inside (their own steps and reads are their business; another's, started
 * in there and not awaited, is not: inside `join`'s loop every check was off, and `opt.step(); opt.zeroGrad()`
 * zeroed the gradients ZeRO's step was still reading, silently; probe DE).
 */
const insideWriters = new AsyncLocalStorage<ReadonlySet<symbol>>();

/** The outermost writer of `t` (`only`: of that kind) that this code is not part of; none inside a backward's hooks. */
function writerFromOutside(t: Tensor, only?: Writes): string | null {
  if (currentRun.getStore() !== undefined) return null;
  const inside = insideWriters.getStore();
  return writers.get(t)?.find((w) => (only === undefined || w.writes === only) && !inside?.has(w.id))?.what ?? null;
}

/**
 * What still writes `t` (`loss.backward()`, `loadCheckpoint()`, …), seen by a caller that is not part
 * of it (a hook or callback of a running backward may step or read it, as torch's optimizer-in-backward
 * does), or null. `void loss.backward(); opt.step()` (torch's habit: its backward is synchronous) stepped
 * gradients not yet there; a load not awaited overwrote the steps taken meanwhile: silently.
 */
export function pendingWriter(t: Tensor): string | null {
  return writers.size === 0 ? null : writerFromOutside(t);
}

/**
 * What still writes `t`'s values (a step, a load, `join`'s loop; not a backward, which writes its
 * gradient only), seen from outside it, or null: what reads the values now reads those of before.
 */
export function pendingValueWriter(t: Tensor): string | null {
  if (writers.size === 0) return null; // every op asks: the common case costs one comparison
  return writerFromOutside(t, 'values');
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
  const id = Symbol(what);
  const held = mark(tensors, { what, writes, id });
  try {
    return await insideWriters.run(new Set([...(insideWriters.getStore() ?? []), id]), fn);
  } finally {
    unmark(held, id);
  }
}

function mark(tensors: Iterable<Tensor>, writer: Writer): Tensor[] {
  const held = [...new Set(tensors)];
  for (const t of held) writers.set(t, [...(writers.get(t) ?? []), writer]);
  return held;
}

function unmark(held: Tensor[], id: symbol): void {
  for (const t of held) {
    const left = writers.get(t)!.filter((w) => w.id !== id);
    if (left.length === 0) writers.delete(t);
    else writers.set(t, left);
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
  const id = Symbol('loss.backward()');
  const held = mark(leaves, { what: 'loss.backward()', writes: 'gradients', id });
  try {
    await currentRun.run(run, () => execute(run));
  } finally {
    unmark(held, id);
  }
}

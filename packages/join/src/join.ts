import { type Tensor, whileWriting } from '@ddp/autograd';
import type { ProcessGroup, Work } from '@ddp/comm';
import { checkBooleanOptions } from '@ddp/tensor';
import { EarlyTerminationError, JoinArgumentError, JoinShadowError } from './errors.js';

/**
 * What a joined rank that cannot shadow adds to the "still active" all-reduce: sums at or above it
 * tell every rank to stop (the count of active ranks is the remainder). The flags are float64, exact
 * to 2^53: in int32, 2048 refusing ranks wrapped the sum negative.
 */
const REFUSED = 1 << 20;

/**
 * What a joined rank runs in place of a Joinable's per-iteration collectives
 * (PyTorch's JoinHook).
 */
export interface JoinHook {
  /** Called once per iteration in which some rank is still active: shadow its collectives. */
  mainHook(): Promise<void> | void;
  /** Called once after every rank has joined; `isLastJoiner` is true on the ranks that joined last. */
  postHook(isLastJoiner: boolean): Promise<void> | void;
  /**
   * Why this rank cannot shadow the next iteration (the error it raises), or null. Asked before
   * each shadowed iteration, so that the active ranks raise too instead of waiting for collectives
   * that never come.
   */
  cannotShadow?(): Error | null;
}

/** Options handed to every `joinHook` (the keyword arguments of PyTorch's `Join(...)`). */
export interface JoinHookOptions {
  /** DDP: divide gradients by the initial world size (true) or by the ranks still active (false). */
  divideByInitialWorldSize?: boolean;
  [k: string]: unknown;
}

/** A class that can take part in `join` (PyTorch's Joinable). */
export interface Joinable {
  joinHook(opts: JoinHookOptions): JoinHook;
  readonly joinProcessGroup: ProcessGroup;
  /**
   * The tensors the loop writes (a model's parameters): marked as written while `join` runs
   * (autograd's whileWriting), so what reads them from outside the loop (a save, a forward)
   * refuses until the join is awaited, where it read the weights of before the loop, silently.
   */
  readonly joinWrites?: readonly Tensor[];
}

export interface JoinOptions extends JoinHookOptions {
  /** false: `fn` runs as is, no join bookkeeping at all (default true). */
  enable?: boolean;
  /** Raise EarlyTerminationError on every rank as soon as one rank runs out of inputs. */
  throwOnEarlyTermination?: boolean;
}

interface JoinConfig {
  readonly throwOnEarlyTermination: boolean;
  /** Only the first joinable of a join issues the per-iteration all-reduce. */
  readonly isFirstJoinable: boolean;
  /** Set once this rank's `fn` returned: hooks may call code that notifies, which must do nothing then. */
  joined: boolean;
  /** The last "still active" all-reduce (callers need not await it); awaited when this rank joins. */
  pending: Work | null;
}

const configs = new WeakMap<Joinable, JoinConfig>();
/** The notice of the iteration this process is in, while a join runs (null outside one). */
let currentNotice: Promise<number | null> | null = null;

/**
 * The join notice of this process's current iteration (null outside `join`): a collective in the
 * model's forward (SyncBatchNorm's) awaits it first, so under throwOnEarlyTermination it raises
 * with the others instead of going out on one rank alone.
 */
export function currentJoinNotice(): Promise<number | null> | null {
  return currentNotice;
}

/**
 * Runs `fn` (a training loop over this rank's inputs) so that ranks with fewer inputs than
 * others keep shadowing the others' collectives once they run out: the async counterpart
 * of PyTorch's `with Join(joinables, ...)`.
 *
 * Every active iteration, the first joinable's `notifyJoinContext` all-reduces a 1 ("still
 * active"). Once `fn` returns, this rank all-reduces 0s: while the sum is non-zero, some
 * rank is still active, so every joinable's `mainHook` runs to match that rank's
 * collectives. When the sum is 0, every rank has joined and each `postHook(isLastJoiner)` runs.
 */
export async function join<T>(joinables: Joinable[], fn: () => Promise<T>, opts: JoinOptions = {}): Promise<T> {
  // each was truthy: `enable: 'false'` joined, `divideByInitialWorldSize: 'false'` divided by the initial size
  const booleans = ['enable', 'throwOnEarlyTermination', 'divideByInitialWorldSize'];
  checkBooleanOptions('join', opts, booleans, (m) => new JoinArgumentError(m));
  const { enable = true, throwOnEarlyTermination = false, ...hookOpts } = opts;
  if (!enable) return fn();
  const group = checkJoinables(joinables);
  const previous = joinables.map((j) => configs.get(j));
  const own = joinables.map(
    (_, i): JoinConfig => ({ throwOnEarlyTermination, isFirstJoinable: i === 0, joined: false, pending: null }),
  );
  for (const [i, j] of joinables.entries()) configs.set(j, own[i]);
  try {
    // marked until the shadowing ends too: a rank that joined first steps there (ZeRO's hook), and
    // what read the weights meanwhile (join not awaited) read those of before, silently (probe AD)
    const writes = joinables.flatMap((j) => j.joinWrites ?? []);
    return await whileWriting(writes, 'join()', 'values', async () => {
      const result = await fn();
      for (const config of own) config.joined = true;
      await own[0].pending?.wait();
      await joinLoop(
        joinables.map((j) => j.joinHook(hookOpts)),
        group,
        throwOnEarlyTermination,
      );
      return result;
    });
  } finally {
    currentNotice = null;
    joinables.forEach((j, i) => {
      const before = previous[i];
      if (before) configs.set(j, before);
      else configs.delete(j);
    });
  }
}

async function joinLoop(hooks: JoinHook[], group: ProcessGroup, throwOnEarlyTermination: boolean): Promise<void> {
  let isLastJoiner = true;
  for (;;) {
    const refusal = hooks.map((h) => h.cannotShadow?.() ?? null).find((e) => e !== null) ?? null;
    // with throwOnEarlyTermination every rank stops at the first shadowed iteration anyway
    const flag = await allReduceFlag(group, refusal && !throwOnEarlyTermination ? REFUSED : 0);
    const active = flag % REFUSED;
    if (active === 0) break;
    if (flag >= REFUSED) throw refusal ?? new JoinShadowError(group.ranks[group.rank], 'saw a joined rank');
    if (throwOnEarlyTermination) {
      // the active ranks' second all-reduce in notifyJoinContext sees this 1 and throws too
      await allReduceFlag(group, 1);
      throw new EarlyTerminationError(group.ranks[group.rank], 'exhausted its inputs first');
    }
    for (const hook of hooks) await hook.mainHook();
    isLastJoiner = false;
  }
  for (const hook of hooks) await hook.postHook(isLastJoiner);
}

/**
 * Called by a Joinable once per iteration, before that iteration's collectives (PyTorch's
 * `Join.notify_join_context`). Resolves with the number of ranks still active this
 * iteration (what DDP divides by when `divideByInitialWorldSize` is false), or null when
 * nothing was sent: outside `join`, for any joinable but the first, after this rank joined.
 * Its collectives are issued synchronously, at the call: a caller may start its own
 * collectives before awaiting the returned promise, and may await it late (or never).
 */
export function notifyJoinContext(joinable: Joinable): Promise<number | null> {
  const config = configs.get(joinable);
  if (!config?.isFirstJoinable || config.joined) return Promise.resolve(null);
  const group = joinable.joinProcessGroup;
  const active = Float64Array.of(1);
  const work = group.allReduce(active);
  config.pending = work;
  const check = config.throwOnEarlyTermination ? Float64Array.of(0) : null;
  const checked = check ? group.allReduce(check) : null;
  const result = (async () => {
    await work.wait();
    await checked?.wait();
    if (check && check[0] > 0)
      throw new EarlyTerminationError(group.ranks[group.rank], 'saw a rank that exhausted its inputs');
    if (active[0] >= REFUSED) throw new JoinShadowError(group.ranks[group.rank], 'is active');
    return active[0];
  })();
  // a caller that never awaits must not crash the process; awaiting still sees the rejection
  result.catch(() => {});
  currentNotice = result;
  return result;
}

/** Whether `joinable` runs inside an enabled `join` and this rank has not joined yet. */
export function isJoinActive(joinable: Joinable): boolean {
  const config = configs.get(joinable);
  return config !== undefined && !config.joined;
}

async function allReduceFlag(group: ProcessGroup, value: number): Promise<number> {
  const flag = Float64Array.of(value);
  await group.allReduce(flag).wait();
  return flag[0];
}

function checkJoinables(joinables: Joinable[]): ProcessGroup {
  if (joinables.length === 0) throw new JoinArgumentError('join needs at least one Joinable');
  const group = joinables[0].joinProcessGroup;
  joinables.forEach((j, i) => {
    if (j.joinProcessGroup !== group) {
      throw new JoinArgumentError(
        `joinable ${i} uses a different process group than joinable 0; every Joinable of a join must share one`,
      );
    }
  });
  if (new Set(joinables).size !== joinables.length) throw new JoinArgumentError('the same Joinable is listed twice');
  return group;
}

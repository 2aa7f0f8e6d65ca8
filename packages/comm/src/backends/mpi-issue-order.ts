import { arraysOverlap } from '../dtypes.js';

/** A call issued and not yet finished (its copy-out included), with the arrays it reads or writes. */
interface Unfinished {
  arrays: readonly ArrayBufferView[];
  done: Promise<unknown>;
}

/**
 * The MPI backend's issue order. A call is staged (its inputs copied, half words widened) when it
 * is issued, and its results copied out when MPI is done, on this thread, while MPI runs the next
 * calls. So a call touching an array an unfinished call touches (on any communicator) is staged
 * and dispatched only once that one finished: it read the array before the earlier call wrote it,
 * or the earlier copy-out overwrote its result (two float16 all-reduces of one array gave 3 where 6
 * is right, and ranks ended with different values). Every later call of the same communicator waits
 * behind a held one, so each communicator's thread (@ddp/mpi) still runs its calls in issue order,
 * which is how MPI matches collectives across ranks; other communicators go on (holding them too,
 * ranks whose arrays tied two groups in different orders waited on each other for good). Nothing
 * is held while no arrays overlap.
 */
export class IssueOrder {
  private readonly unfinished = new Set<Unfinished>();
  /** Per communicator handle: settles once its latest held call was dispatched; absent when none is held. */
  private readonly held = new Map<number, Promise<void>>();

  /**
   * `threadPerGroup` false: @ddp/mpi runs every communicator on one thread (MPI granted less than
   * MPI_THREAD_MULTIPLE), which must get each rank's calls in issue order: one hold for all of them.
   */
  constructor(private readonly threadPerGroup = true) {}

  /**
   * `start(restage)` on communicator `comm` now, or once the unfinished calls touching `arrays`, and
   * any held call of `comm` ('every': of any communicator), have settled. restage: the call waited
   * for an unfinished call touching its arrays, so its first staging read them too early (waiting
   * only behind a held call, its staging at the call stands). Resolves as start's promise does.
   */
  issue<T>(
    comm: number | 'every',
    arrays: readonly ArrayBufferView[],
    start: (restage: boolean) => Promise<T>,
  ): Promise<T> {
    const waits = [...this.unfinished]
      .filter((u) => u.arrays.some((a) => arrays.some((b) => arraysOverlap(a, b))))
      .map((u) => u.done);
    const restage = waits.length > 0;
    const key = comm === 'every' || this.threadPerGroup ? comm : 0;
    if (key === 'every') waits.push(...this.held.values());
    else if (this.held.has(key)) waits.push(this.held.get(key)!);
    let done: Promise<T>;
    if (waits.length === 0) done = start(false);
    else {
      const ready = Promise.allSettled(waits).then(() => {});
      done = ready.then(() => start(restage));
      const dispatched = ready.then(() => {}); // registered after start's reaction, so it runs after it
      if (key !== 'every') {
        this.held.set(key, dispatched);
        void dispatched.then(() => {
          if (this.held.get(key) === dispatched) this.held.delete(key);
        });
      }
    }
    const entry = { arrays, done };
    this.unfinished.add(entry);
    const forget = () => {
      this.unfinished.delete(entry);
    };
    done.then(forget, forget);
    return done;
  }
}

import { resolve } from 'node:path';

/** Per directory, the last save this process began: its turn to commit ends the chain. */
const lastSave = new Map<string, Promise<void>>();

export interface CommitTurn {
  /** Settles once every save into the directory this process began before has committed or failed. */
  readonly ready: Promise<void>;
  /** Ends this save's turn (committed, failed or given up): the next may commit. Call it always. */
  done(): void;
}

/**
 * Takes a save's turn to commit into `dir`, in the order this process called the saves: call it
 * before the save's first await, and wait for `ready` before `commitEntry`. Two overlapping saves
 * committed in the order their lock retries fell, so step 10's could commit after step 11's, and
 * its clean-up deleted step 11: the newest checkpoint lost, an older one loaded, no error.
 */
export function takeCommitTurn(dir: string): CommitTurn {
  const key = resolve(dir);
  const ready = lastSave.get(key) ?? Promise.resolve();
  let done = () => {};
  const mine = new Promise<void>((settle) => {
    done = settle;
  });
  lastSave.set(key, mine);
  void mine.then(() => {
    if (lastSave.get(key) === mine) lastSave.delete(key);
  });
  return { ready, done };
}

import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { CommError, CommTimeoutError } from '../errors.js';
import { decodeText } from '../store/store.js';
import { TCPStore, type TCPStoreOptions } from '../store/tcp-store-client.js';

/**
 * The store a world meets in, told apart from the store of a world this process destroyed:
 * a rank that re-initialises at once can reach rank 0's old store before rank 0 has closed it.
 * It claimed its rank there a second time (DuplicateRankError) or lost the store as it closed.
 * Rank 0 names each store it hosts; the other ranks wait for a store whose name they have not
 * finished with.
 */
const NAME_KEY = 'ddp/store_name';
/** Names of the stores of worlds this process destroyed. */
const finished = new Set<string>();

export interface WorldStore {
  store: TCPStore;
  /** What destroyProcessGroup records, so the next init waits for another store. */
  name: string;
}

export async function connectWorldStore(
  opts: TCPStoreOptions & { timeoutMs: number; rank: number },
): Promise<WorldStore> {
  const deadline = Date.now() + opts.timeoutMs;
  for (;;) {
    const store = await TCPStore.create({ ...opts, timeoutMs: Math.max(1, deadline - Date.now()) });
    if (store.server) {
      const name = randomUUID();
      await store.set(NAME_KEY, name);
      return { store, name };
    }
    const name = await nameOf(store, deadline).catch((e: unknown) => {
      // the old store closed under this check: the next attempt meets the new one
      if (finished.size > 0 && e instanceof CommError && !(e instanceof CommTimeoutError)) return null;
      throw e;
    });
    if (name !== null && !finished.has(name)) return { store, name };
    await store.close();
    if (Date.now() > deadline) {
      const where = `${opts.host}:${opts.port}`;
      const why = `the store at ${where} is still the one of the world this process destroyed (did rank 0 destroy it?)`;
      throw new CommTimeoutError(`rank ${opts.rank}: ${why}`, { rank: opts.rank, ranks: [0], op: 'initProcessGroup' });
    }
    await sleep(20);
  }
}

/** Rank 0 names its store right after it connects. */
async function nameOf(store: TCPStore, deadline: number): Promise<string> {
  await store.wait([NAME_KEY], Math.max(1, deadline - Date.now()));
  return decodeText(await store.get(NAME_KEY));
}

export function finishWorldStore(name: string): void {
  finished.add(name);
}

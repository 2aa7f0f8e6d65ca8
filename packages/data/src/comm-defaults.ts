import { NoProcessGroupError } from './errors.js';

/** The part of @ddp/comm this package needs: the default group's rank and size. */
interface CommDefaults {
  isInitialized(): boolean;
  getRank(): number;
  getWorldSize(): number;
}

/**
 * @ddp/comm, loaded once without making it a hard requirement: a process that never
 * initialises a group (single-process training, tests) must still be able to use the
 * samplers with explicit ranks.
 */
let loadError = '';
const comm: Partial<CommDefaults> = await import('@ddp/comm').then(
  (m) => m as Partial<CommDefaults>,
  (e: unknown) => {
    loadError = ` (@ddp/comm could not be loaded: ${e instanceof Error ? e.message : String(e)})`;
    return {};
  },
);

/**
 * Fills a missing rank or world size from the default process group; throws
 * NoProcessGroupError, naming `who` and its options, when one is missing and there is no group.
 */
export function rankAndSizeOrDefault(
  given: { rank?: number; size?: number },
  who: string,
  names: { rank: string; size: string },
): { rank: number; size: number } {
  if (given.rank !== undefined && given.size !== undefined) return { rank: given.rank, size: given.size };
  if (!comm.isInitialized?.() || !comm.getRank || !comm.getWorldSize) {
    throw new NoProcessGroupError(
      `${who} needs ${names.size} and ${names.rank}: pass them, or call initProcessGroup() first${loadError}`,
    );
  }
  return { rank: given.rank ?? comm.getRank(), size: given.size ?? comm.getWorldSize() };
}

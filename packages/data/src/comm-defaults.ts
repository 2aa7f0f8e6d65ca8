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
const comm: Partial<CommDefaults> = await import('@ddp/comm').then(
  (m) => m as Partial<CommDefaults>,
  () => ({}),
);

/** Rank and world size of the default process group, or null when there is none. */
export function defaultGroupRankAndSize(): { rank: number; worldSize: number } | null {
  if (!comm.isInitialized || !comm.getRank || !comm.getWorldSize) return null;
  if (!comm.isInitialized()) return null;
  return { rank: comm.getRank(), worldSize: comm.getWorldSize() };
}

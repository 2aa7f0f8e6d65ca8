import type { SharedMemory } from '@ddp/shm';

export type { SharedMemory };

/**
 * The optional native addon (@ddp/shm): shared memory between the ranks of a host and
 * vectorised reductions. null where it is not installed or was not built; everything then
 * runs in JavaScript over sockets.
 */
export const native: SharedMemory | null = await import('@ddp/shm').then(
  (m) => m.loadSharedMemory(),
  () => null,
);

import type { ProcessGroup } from '@ddp/comm';

/** Bad use of fullyShard (a unit's parameters used while resharded, a unit nested in a resharded unit, bad options). */
export class FSDPError extends Error {
  override readonly name = 'FSDPError';
}

/** The global rank of this process in `group`: what messages name (the group rank is another number off the world). */
export const globalRank = (group: ProcessGroup) => group.ranks[group.rank];

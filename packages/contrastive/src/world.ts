import type { Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { allGatherLocalGrad, allGatherRows, type GatheredRows } from './gather.js';

/** Options every loss takes: the group the batch is spread over (none: a world of one). */
export interface LossOptions {
  group?: ProcessGroup;
  /** Test-only switch to the naive gather, to show the gradients it gets wrong. */
  naiveGather?: boolean;
}

/** The gather of rows a loss needs; in a world of one, x itself (owned by the caller: `own` false). */
export async function gatherForLoss(
  x: Tensor,
  opts: LossOptions,
): Promise<GatheredRows & { own: boolean; worldSize: number }> {
  const group = opts.group;
  if (!group || group.size === 1)
    return { gathered: x, rowsPerRank: [x.shape[0]], offset: 0, own: false, worldSize: 1 };
  const rows = await (opts.naiveGather ? allGatherLocalGrad : allGatherRows)(x, group);
  return { ...rows, own: true, worldSize: group.size };
}

/** Row indices offset..offset+n-1: the labels of this rank's rows among the global ones. */
export const rangeFrom = (offset: number, n: number, step = 1): number[] =>
  [...Array(n).keys()].map((i) => offset + i * step);

import type { Tensor } from '@ddp/autograd';
import { getDefaultGroup, isInitialized, type ProcessGroup } from '@ddp/comm';
import { checkBooleanOptions, checkOptionNames } from '@ddp/tensor';
import { ContrastiveError } from './errors.js';
import { allGatherLocalGrad, allGatherRows, type GatheredRows } from './gather.js';

/** Options every loss takes. */
export interface LossOptions {
  /**
   * The group the batch is spread over. Default: the default process group once one is
   * initialised (as SyncBatchNorm; a forgotten group in a DDP run used to give a loss over this
   * rank's rows alone, silently), a world of one otherwise; null: this rank's rows alone.
   */
  group?: ProcessGroup | null;
  /** Test-only switch to the naive gather, to show the gradients it gets wrong. */
  naiveGather?: boolean;
}

/** The group a loss spreads its batch over (see LossOptions.group); undefined: a world of one. */
export function lossGroup(opts: Pick<LossOptions, 'group'>): ProcessGroup | undefined {
  if (opts.group === undefined) return isInitialized() ? getDefaultGroup() : undefined;
  return opts.group ?? undefined;
}

/**
 * Refuses an option the loss `op` does not know (ContrastiveError): ignored, `{ temperature: 0.1 }`
 * for ntXentLoss's `tau` trained at 0.5 without a word. `known` beside `group`.
 */
export function checkLossOptions(op: string, opts: object, extra: readonly string[]): void {
  const error = (m: string) => new ContrastiveError(m.slice(op.length + 2), worldRankOf(lossGroup(opts)), op);
  checkOptionNames(op, opts, ['group', ...extra], error);
  // `naiveGather: 'false'` was truthy: the gather whose gradient stays local, silently
  checkBooleanOptions(op, opts, ['naiveGather'], error);
}

/**
 * Two float32 [batch, dim] feature tensors of one shape (`what` names them), or a ContrastiveError
 * naming the loss; returns [batch, dim].
 */
export function checkFeaturePair(op: string, a: Tensor, b: Tensor, opts: LossOptions, what: string): [number, number] {
  const [n, d] = a.shape;
  const pair = a.rank === 2 && b.rank === 2 && b.shape[0] === n && b.shape[1] === d;
  if (!pair || a.dtype !== 'float32' || b.dtype !== 'float32') {
    const got = `[${a.shape}] ${a.dtype} and [${b.shape}] ${b.dtype}`;
    throw new ContrastiveError(
      `${what} must both be float32 [batch, dim], got ${got}`,
      worldRankOf(lossGroup(opts)),
      op,
    );
  }
  return [n, d];
}

/** This rank's number in the world, for error messages (0 in a world of one). */
export const worldRankOf = (group: ProcessGroup | undefined): number => (group ? (group.ranks[group.rank] ?? 0) : 0);

/** The gather of rows a loss needs; in a world of one, x itself (owned by the caller: `own` false). */
export async function gatherForLoss(
  x: Tensor,
  opts: LossOptions,
): Promise<GatheredRows & { own: boolean; worldSize: number }> {
  const group = lossGroup(opts);
  if (!group || group.size === 1)
    return { gathered: x, rowsPerRank: [x.shape[0]], offset: 0, own: false, worldSize: 1 };
  const rows = await (opts.naiveGather ? allGatherLocalGrad : allGatherRows)(x, group);
  return { ...rows, own: true, worldSize: group.size };
}

/** Row indices offset..offset+n-1: the labels of this rank's rows among the global ones. */
export const rangeFrom = (offset: number, n: number, step = 1): number[] =>
  [...Array(n).keys()].map((i) => offset + i * step);

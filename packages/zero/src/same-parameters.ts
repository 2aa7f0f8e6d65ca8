import { crc32 } from 'node:zlib';
import { firstSplitAmong, parameterShardOf, type Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { type LoadedSave, saveFingerprint } from '@ddp/nn';
import { ZeroError } from './errors.js';

/** Each parameter's CRC-32 (of its bytes), taken before this rank's shard is updated. */
export function parameterChecksums(params: readonly Tensor[]): Int32Array {
  return Int32Array.from(params, (p) => {
    const values = p.data.dataSync() as Float32Array;
    return crc32(new Uint8Array(values.buffer, values.byteOffset, values.byteLength)) | 0;
  });
}

/** The error for parameter i differing between group ranks `first` and `other`, raised on rank `me`. */
export type DifferingParameterError = (me: number, i: number, first: number, other: number) => Error;

/**
 * Refuses parameters whose parts ranks of `group` hold (FSDP's shards, tensor-parallel ones over the
 * tp group): ZeRO averages replicas, and the first step's check took FSDP's parts for differing
 * replicas and advised broadcasting rank 0's, which would copy one part over the others.
 */
export function refuseSplitParameters(params: readonly Tensor[], group: ProcessGroup): void {
  const i = firstSplitAmong(params, group.ranks);
  if (i >= 0)
    throw new ZeroError(
      `ZeroRedundancyOptimizer: parameter ${i} is a shard whose parts ranks of its group hold (FSDP's, or a ` +
        "tensor-parallel layer's): FSDP shards the optimizer state itself (give it a plain optimizer); run ZeRO " +
        'over the data-parallel group (grid.dpGroup) for tensor-parallel shards',
    );
}

/**
 * ZeRO's error: a tensor-parallel shard two of whose parts the group holds (ZeRO over the world
 * or the tp group, where the data-parallel group was meant) is named as such, as the advice to
 * broadcast rank 0's parameters would copy one part over the others.
 */
export const zeroDiffers =
  (params: readonly Tensor[]): DifferingParameterError =>
  (me, i, first, other) => {
    const shard = parameterShardOf(params[i]);
    if (shard?.ranks.includes(first) && shard.ranks.includes(other))
      return new ZeroError(
        `rank ${me}: parameter ${i} is a tensor-parallel shard (here part of ranks [${shard.ranks}]), and ranks ` +
          `${first} and ${other} of the group hold different parts of it: run ZeRO over the data-parallel ` +
          'group (grid.dpGroup)',
      );
    return new ZeroError(
      `rank ${me}: parameter ${i} differs between ranks ${first} and ${other} at the first step: initialise ` +
        "the model alike on every rank (the same seed) or broadcast rank 0's parameters first " +
        '(DistributedDataParallel.create does)',
    );
  };

/**
 * The save this rank loaded (nn's saveFingerprint; 0: none) ahead of the parameters' checksums. A load
 * resolves the directory's newest entry on each rank by itself, so a save committed between two
 * ranks' loads (or a file system that lists it late on one node) resumed the ranks from different
 * steps, silently; the first step (ZeRO) or forward (FSDP) after a load compares them.
 */
export function withLoadedEntry(loaded: LoadedSave | null, checksums: Int32Array): Int32Array {
  return Int32Array.from([saveFingerprint(loaded), ...checksums]);
}

/** `differs` for checksums after withLoadedEntry's fingerprint; a differing fingerprint is `Kind`'s own error. */
export const afterLoadedEntry =
  (
    loaded: LoadedSave | null,
    differs: DifferingParameterError,
    Kind: new (m: string) => Error,
  ): DifferingParameterError =>
  (me, i, first, other) =>
    i > 0
      ? differs(me, i - 1, first, other)
      : new Kind(
          `rank ${me}: ranks ${first} and ${other} loaded different checkpoint entries (this rank: ` +
            `${loaded?.path ?? 'none'}): each resolved the directory's newest by itself (a save committed ` +
            'between the loads, or a file system listing it late on one node); load one entry on every rank: ' +
            "the path rank 0's load returned, broadcast to the others",
        );

/**
 * Raises an error on every rank when the ranks' parameters differ (collective). ZeRO (and FSDP)
 * make them equal after a step, each shard from its owner, but a first step from different
 * initial weights (a seed taken per rank, no DDP to broadcast rank 0's) would average
 * gradients of different models into a result no single model gives, silently.
 */
export async function checkSameParameters(
  checksums: Int32Array,
  group: ProcessGroup,
  differs: DifferingParameterError,
): Promise<void> {
  const all = (await group.allGather(checksums).wait()) as Int32Array[];
  for (let r = 1; r < all.length; r++) {
    const i = all[r].findIndex((c, j) => c !== all[0][j]);
    if (i >= 0) throw differs(group.ranks[group.rank], i, group.ranks[0], group.ranks[r]);
  }
}

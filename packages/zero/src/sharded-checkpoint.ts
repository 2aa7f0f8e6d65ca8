/**
 * Sharded checkpoints for ZeroRedundancyOptimizer: every rank writes the optimizer state of
 * the parameters it owns (no gather on one rank), rank 0 writes the model and a manifest.
 * A save is a new entry of the checkpoint directory (@ddp/nn's checkpoint-dir: entries
 * committed by one rename, a `latest` pointer), written beside the previous checkpoint: the
 * manifest goes in after every rank has confirmed its shard, then rank 0 commits the entry.
 * A crash at any point leaves the previous checkpoint loadable. State is keyed by the
 * parameter's global index, so a checkpoint loads onto any world size (resharding).
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Tensor } from '@ddp/autograd';
import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import {
  cleanCheckpointDir,
  commitEntry,
  crashPoint,
  createTemporaryEntry,
  type Generator,
  type GeneratorState,
  type LRScheduler,
  type Module,
  optimizerStateTensors,
  type ParamState,
  type SafeTensor,
  type SchedulerState,
  saveSafetensors,
  sealJson,
  temporaryEntryName,
  toSafeTensor,
  writeFileAtomic,
} from '@ddp/nn';
import type { ZeroRedundancyOptimizer } from './zero-redundancy-optimizer.js';

export const MANIFEST_FILE = 'manifest.json';
export const MODEL_FILE = 'model.safetensors';
/** Written instead of the model when none is given: every parameter, as `param.<global index>`. */
export const PARAMS_FILE = 'params.safetensors';

export const shardFile = (rank: number, worldSize: number) => `optimizer-shard-${rank}-of-${worldSize}.safetensors`;

/** A sharded checkpoint that is missing, incomplete, unreadable or does not fit the optimizer. */
export class ShardedCheckpointError extends Error {
  override readonly name = 'ShardedCheckpointError';
  /** The file at fault, when one is. */
  readonly file: string | undefined;
  constructor(message: string, file?: string) {
    super(message);
    this.file = file;
  }
}

/** 2: the manifest and the safetensors metadata carry checksums (1: written before they did). */
export const VERSION = 2;

export interface ShardedManifest {
  format: 'ddp-zero-sharded-checkpoint';
  version: 1 | 2;
  worldSize: number;
  step: number;
  /** One per global parameter position: its name (the model's, or `param.<i>`), shape and shard. */
  parameters: { name: string; shape: number[]; shard: number }[];
  /** The global groups' hyperparameters, `params` as global indices. */
  paramGroups: Record<string, unknown>[];
  shards: string[];
  weights: string;
  /** The LR scheduler's and the generator's state, when saved (absent in checkpoints written before). */
  scheduler?: SchedulerState | null;
  generator?: GeneratorState | null;
  extra: unknown;
}

/** What a sharded checkpoint holds besides the optimizer's shards (the model's weights when `model` is given). */
export interface ShardedCheckpointContents {
  model?: Module;
  optimizer: ZeroRedundancyOptimizer<{ lr: number }>;
  scheduler?: LRScheduler;
  generator?: Generator;
}

type AnyZero = ShardedCheckpointContents['optimizer'];

export function globalParams(zero: AnyZero): Tensor[] {
  return zero.paramGroups.flatMap((g) => g.params);
}

/**
 * Runs `work` on every rank, then every rank learns whether every rank succeeded (MAX of the
 * failure flags), so none waits on a failed peer and all fail together.
 */
export async function onEveryRank(group: ProcessGroup, work: () => Promise<void>, failure: string): Promise<void> {
  let error: unknown = null;
  try {
    await work();
  } catch (e) {
    error = e;
  }
  const flag = new Int32Array([error === null ? 0 : 1]);
  await group.allReduce(flag, { op: ReduceOp.MAX }).wait();
  if (flag[0] !== 0) throw error ?? new ShardedCheckpointError(failure);
}

/** Rank 0's choice of `name` (a temporary entry's: under 300 bytes, host names being at most 253), on every rank. */
export async function fromRank0(group: ProcessGroup, name: string): Promise<string> {
  const buf = new Int32Array(512);
  if (group.rank === 0) buf.set(new TextEncoder().encode(name));
  await group.broadcast(buf, { src: 0 }).wait();
  return new TextDecoder().decode(Uint8Array.from(buf.subarray(0, buf.indexOf(0))));
}

/** What one rank writes of a sharded checkpoint, copied from the live state. */
function snapshot(contents: ShardedCheckpointContents & { step: number; extra?: unknown }) {
  const zero = contents.optimizer;
  const { rank, size } = zero.processGroup;
  const params = globalParams(zero);
  const index = new Map(params.map((p, i) => [p, i]));
  const { tensors, scalars } = optimizerStateTensors(
    [...(zero.optim?.state ?? [])].map(([p, state]): [number, ParamState] => [index.get(p)!, state]),
  );
  const weights =
    rank !== 0
      ? null
      : contents.model
        ? [...contents.model.stateDict()].map(([k, t]): [string, SafeTensor] => [k, toSafeTensor(t)])
        : params.map((p, i): [string, SafeTensor] => [`param.${i}`, toSafeTensor(p.data)]);
  const names = new Map(contents.model?.namedParameters().map(([n, p]) => [p as Tensor, n]) ?? []);
  const manifest: ShardedManifest = {
    format: 'ddp-zero-sharded-checkpoint',
    version: VERSION,
    worldSize: size,
    step: contents.step,
    parameters: params.map((p, i) => ({
      name: names.get(p) ?? `param.${i}`,
      shape: [...p.shape],
      shard: zero.partition.owner.get(p)!,
    })),
    paramGroups: zero.paramGroups.map(({ params: ps, ...hyper }) => ({
      ...hyper,
      params: ps.map((q) => index.get(q)!),
    })),
    shards: Array.from({ length: size }, (_, r) => shardFile(r, size)),
    weights: contents.model ? MODEL_FILE : PARAMS_FILE,
    scheduler: contents.scheduler?.stateDict() ?? null,
    generator: contents.generator?.getState() ?? null,
    extra: contents.extra ?? null,
  };
  const manifestText = sealJson({ ...manifest });
  return { tensors, scalars, weights, manifestText };
}

/**
 * Writes a sharded checkpoint of `optimizer` (and `model`) as a new entry of `dir`. Collective:
 * every rank of the optimizer's process group calls it; it returns once the entry is committed.
 */
export async function saveShardedCheckpoint(
  dir: string,
  contents: ShardedCheckpointContents & { step: number; extra?: unknown },
): Promise<void> {
  const zero = contents.optimizer;
  const { rank, size } = zero.processGroup;
  // everything is copied before the first await: training that went on while the save wrote
  // saved shards and weights of later steps under the step given (silently)
  const { tensors, scalars, weights, manifestText } = snapshot(contents);
  const entry = join(dir, await fromRank0(zero.processGroup, temporaryEntryName()));
  const failed = `saveShardedCheckpoint(${dir})`;
  try {
    await onEveryRank(
      zero.processGroup,
      async () => {
        if (rank !== 0) return;
        await cleanCheckpointDir(dir, MANIFEST_FILE);
        await createTemporaryEntry(dir, entry.slice(dir.length + 1));
      },
      `${failed}: rank 0 could not create ${entry}`,
    );

    await onEveryRank(
      zero.processGroup,
      async () => {
        await saveSafetensors(join(entry, shardFile(rank, size)), tensors, { scalars: JSON.stringify(scalars) });
        if (rank === 0) {
          await saveSafetensors(join(entry, contents.model ? MODEL_FILE : PARAMS_FILE), weights!, { format: 'pt' });
        }
        crashPoint('shard-written');
      },
      `${failed}: another rank failed to write its shard; the checkpoint is incomplete`,
    );

    await onEveryRank(
      zero.processGroup,
      async () => {
        if (rank !== 0) return;
        await writeFileAtomic(join(entry, MANIFEST_FILE), manifestText);
        await commitEntry(dir, entry, contents.step, MANIFEST_FILE);
      },
      `${failed}: rank 0 failed to commit the checkpoint`,
    );
  } catch (error) {
    if (rank === 0) await rm(entry, { recursive: true, force: true }); // nothing there once committed
    throw error;
  }
}

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
import { basename, join } from 'node:path';
import type { Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import {
  cleanCheckpointDir,
  commitManifestEntry,
  crashPoint,
  createTemporaryEntry,
  type Generator,
  type GeneratorState,
  type LRScheduler,
  type Module,
  modelPart,
  optimizerStateTensors,
  type ParamState,
  refuseParamsOutsideModel,
  refusePendingGradients,
  type SafeTensor,
  type SaveOptions,
  type SchedulerState,
  saveSafetensors,
  sealJson,
  shardsHeld,
  takeCommitTurn,
  temporaryEntryName,
  toSafeTensor,
  withSaveId,
  writeFileAtomic,
} from '@ddp/nn';
import { checkOptionNames } from '@ddp/tensor';
import { afterPreviousSave, checkpointGroupOf, fromRank0, onEveryRank } from './checkpoint-group.js';
import { ShardedCheckpointError } from './errors.js';
import { ZeroRedundancyOptimizer } from './zero-redundancy-optimizer.js';

export const MANIFEST_FILE = 'manifest.json';
export const MODEL_FILE = 'model.safetensors';
/** Written instead of the model when none is given: every parameter, as `param.<global index>`. */
export const PARAMS_FILE = 'params.safetensors';

export const shardFile = (rank: number, worldSize: number) => `optimizer-shard-${rank}-of-${worldSize}.safetensors`;

export { ShardedCheckpointError };

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
  /** The LR scheduler's state, when saved (absent in checkpoints written before). */
  scheduler?: SchedulerState | null;
  /** Rank 0's generator state: what checkpoints before `generators` hold. */
  generator?: GeneratorState | null;
  /** Each rank's generator state, by rank (null where a rank gave none), when any was saved. */
  generators?: (GeneratorState | null)[] | null;
  /** The wrapped optimizer's class (absent before): Adam's moments loaded into SGD silently. */
  kind?: string;
  extra: unknown;
  /** The save's id, in every file it wrote (@ddp/nn's checkpoint-binding); absent before. */
  save?: string;
  /** Which tensor-parallel shards the parameters are (nn's shardsHeld), and a digest of the model's part
   * (nn's modelPart: names, shapes, shards); absent before. */
  parameterShards?: string | null;
  modelPart?: string;
}

/** What a sharded checkpoint holds besides the optimizer's shards (the model's weights when `model` is given). */
export interface ShardedCheckpointContents {
  model?: Module;
  optimizer: ZeroRedundancyOptimizer<{ lr: number }>;
  scheduler?: LRScheduler;
  generator?: Generator;
}

type AnyZero = ShardedCheckpointContents['optimizer'];

/** A key it does not know refused (`optimiser` in a prebuilt object passed TypeScript, then nothing of it was kept). */
export function checkContents(where: string, contents: object, options?: SaveOptions): void {
  const error = (m: string) => new ShardedCheckpointError(m);
  // step and extra are what a load returns: one contents object may serve save and load
  checkOptionNames(where, contents, ['model', 'optimizer', 'scheduler', 'generator', 'step', 'extra'], error, 'key');
  if (options) checkOptionNames(where, options, ['expectNewest'], error);
  // a plain optimizer (a one-process run resuming a ZeRO run) failed deep inside with a TypeError (probe BU)
  const { optimizer } = contents as { optimizer?: unknown };
  if (!(optimizer instanceof ZeroRedundancyOptimizer))
    throw error(
      `${where}: contents.optimizer must be a ZeroRedundancyOptimizer, got ` +
        `${optimizer?.constructor?.name ?? optimizer}; ` +
        "a plain optimizer's state moves through @ddp/nn's saveCheckpoint / loadCheckpoint (a ZeRO run's " +
        'after consolidateStateDict())',
    );
}

export function globalParams(zero: AnyZero): Tensor[] {
  return zero.paramGroups.flatMap((g) => g.params);
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
  const parameters = params.map((p, i) => ({
    name: names.get(p) ?? `param.${i}`,
    shape: [...p.shape],
    shard: zero.partition.owner.get(p)!,
  }));
  const parameterShards = shardsHeld(contents.model?.parameters() ?? params);
  const manifest: ShardedManifest = {
    format: 'ddp-zero-sharded-checkpoint',
    version: VERSION,
    worldSize: size,
    step: contents.step,
    parameters,
    paramGroups: zero.paramGroups.map(({ params: ps, ...hyper }) => ({
      ...hyper,
      params: ps.map((q) => index.get(q)!),
    })),
    shards: Array.from({ length: size }, (_, r) => shardFile(r, size)),
    weights: contents.model ? MODEL_FILE : PARAMS_FILE,
    scheduler: contents.scheduler?.stateDict() ?? null,
    generators: null,
    kind: zero.stateKind(),
    extra: contents.extra ?? null,
    parameterShards,
    modelPart: modelPart(
      parameters.map((p) => `${p.name}[${p.shape}]`),
      parameterShards,
    ),
  };
  sealJson({ ...manifest }); // refuses what JSON cannot keep at the call, before anything is written
  // a copy of the call's values (`extra` changed while the save wrote was saved changed)
  const copy = JSON.parse(JSON.stringify(manifest)) as ShardedManifest;
  return { tensors, scalars, weights, manifest: copy, generator: contents.generator?.getState() ?? null };
}

/**
 * Every rank's generator state, by rank: ranks often draw streams of their own (dropout seeded by
 * rank), and saving rank 0's alone gave every rank rank 0's stream on resume.
 */
async function gatherGenerators(group: ProcessGroup, state: GeneratorState | null) {
  const all = await group.allGather(state ? Float64Array.of(state.seed, state.offset) : Float64Array.of(-1, -1)).wait();
  const states = all.map((a) => (a[0] < 0 ? null : { seed: a[0], offset: a[1] }));
  return states.every((s) => s === null) ? null : states;
}

/**
 * Writes a sharded checkpoint of `optimizer` (and `model`) as a new entry of `dir`. Collective:
 * every rank of the optimizer's process group calls it; it returns once the entry is committed.
 */
export async function saveShardedCheckpoint(
  dir: string,
  contents: ShardedCheckpointContents & { step: number; extra?: unknown },
  options: SaveOptions = {},
): Promise<string> {
  checkContents(`saveShardedCheckpoint(${dir})`, contents, options);
  // what a backward, step or join loop not awaited still writes: the save held the state of before
  const where = `saveShardedCheckpoint(${dir})`;
  refusePendingGradients(where, globalParams(contents.optimizer), (m) => new ShardedCheckpointError(m));
  if (contents.model)
    refuseParamsOutsideModel(
      where,
      contents.model,
      contents.optimizer.paramGroups,
      (m) => new ShardedCheckpointError(m),
    );
  const { expectNewest } = options;
  const zero = contents.optimizer;
  const { rank, size } = zero.processGroup;
  // everything is copied before the first await: training that went on while the save wrote
  // saved shards and weights of later steps under the step given (silently)
  const { tensors, scalars, weights, manifest, generator } = snapshot(contents);
  const turn = takeCommitTurn(dir);
  return afterPreviousSave(zero, writeEntry);

  async function writeEntry(): Promise<string> {
    let entry: string | null = null;
    let committed = '';
    const failed = `saveShardedCheckpoint(${dir})`;
    try {
      // a group of its own: a save not awaited ran its collectives among the training's on the
      // optimizer's group, and the two ranks interleaved them differently (CollectiveMismatchError)
      const group = await checkpointGroupOf(zero);
      const generators = await gatherGenerators(group, generator);
      entry = join(dir, await fromRank0(group, temporaryEntryName()));
      const temporary = entry;
      const save = basename(entry); // the id binding the entry's files (nn's checkpoint-binding)
      await onEveryRank(
        group,
        async () => {
          if (rank !== 0) return;
          await cleanCheckpointDir(dir, MANIFEST_FILE);
          await createTemporaryEntry(dir, save);
        },
        `${failed}: rank 0 could not create ${entry}`,
      );

      await onEveryRank(
        group,
        async () => {
          const scalarsMetadata = withSaveId(save, { scalars: JSON.stringify(scalars) });
          await saveSafetensors(join(temporary, shardFile(rank, size)), tensors, scalarsMetadata);
          if (rank === 0) {
            const file = join(temporary, contents.model ? MODEL_FILE : PARAMS_FILE);
            await saveSafetensors(file, weights!, withSaveId(save, { format: 'pt' }));
          }
          crashPoint('shard-written');
        },
        `${failed}: another rank failed to write its shard; the checkpoint is incomplete`,
      );

      await turn.ready; // on every rank: rank 0 alone would leave the others waiting in the commit's all-reduce
      await onEveryRank(
        group,
        async () => {
          if (rank !== 0) return;
          await writeFileAtomic(join(temporary, MANIFEST_FILE), sealJson({ ...manifest, generators, save }));
          const kind = { file: MANIFEST_FILE, format: 'ddp-zero-sharded-checkpoint' };
          const check = { where: failed, expectNewest, owner: zero, part: manifest.modelPart! };
          committed = await commitManifestEntry(dir, temporary, contents.step, kind, check);
        },
        `${failed}: rank 0 failed to commit the checkpoint`,
      );
      return join(dir, await fromRank0(group, basename(committed)));
    } catch (error) {
      // nothing there once committed; a failure here (its dir not a directory) must not hide why the save failed
      if (rank === 0 && entry) await rm(entry, { recursive: true, force: true }).catch(() => {});
      throw error;
    } finally {
      turn.done();
    }
  }
}

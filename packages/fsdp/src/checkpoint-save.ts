/**
 * Sharded FSDP checkpoints: every rank writes its shards (parameters and optimizer state) to its
 * own file of a new entry of the checkpoint directory (@ddp/nn's checkpoint-dir: immutable
 * entries committed by one rename), rank 0 the whole tensors that are not sharded (frozen
 * parameters, buffers) and, once every rank has confirmed its file, the manifest; then it commits
 * the entry. A crash at any moment leaves the previous checkpoint loadable. The save works from a
 * host copy taken first (`snapshot`), so `saveAsync` can let training go on while it writes.
 */
import { rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import {
  type CommitTurn,
  cleanCheckpointDir,
  commitManifestEntry,
  crashPoint,
  createTemporaryEntry,
  modelPart,
  type Optimizer,
  type Parameter,
  refusePendingGradients,
  type SafeTensor,
  type SaveOptions,
  saveSafetensors,
  sealJson,
  takeCommitTurn,
  temporaryEntryName,
  toSafeTensor,
  withSaveId,
  writeFileAtomic,
} from '@ddp/nn';
import { copyTensorInto, tf } from '@ddp/tensor';
import { afterPreviousSave, checkpointGroupOf, fromRank0, onEveryRank, ShardedCheckpointError } from '@ddp/zero';
import type { FSDPModule } from './fully-shard.js';

export const MANIFEST_FILE = 'manifest.json';
/** Rank 0's file of what every rank holds whole: frozen parameters and buffers, by module name. */
export const REPLICATED_FILE = 'replicated.safetensors';
export const shardFile = (rank: number, worldSize: number) => `fsdp-shard-${rank}-of-${worldSize}.safetensors`;

export type AnyOptimizer = Optimizer<{ lr: number }>;

export interface FSDPManifest {
  format: 'ddp-fsdp-sharded-checkpoint';
  /** 3: each parameter sharded on its own (FlatShard); 1 and 2: each unit's parameters as one flat buffer, sharded. */
  version: 1 | 2 | 3;
  worldSize: number;
  step: number;
  /**
   * Per unit (the root first, then the units below it in module order): its parameters; versions 1
   * and 2 also the flat buffer's layout (its elements, and each rank's share of them).
   */
  units: { total?: number; shardSize?: number; params: { name: string; shape: number[] }[] }[];
  /**
   * The optimizer's groups' hyperparameters, `params` as [unit, parameter] pairs (version 3) or
   * unit indices (the unit's one flat shard; versions 1 and 2).
   */
  paramGroups: Record<string, unknown>[];
  shards: string[];
  /** The optimizer's class (absent before): Adam's moments loaded into SGD silently. */
  kind?: string;
  extra: unknown;
  /** The save's id, in every file it wrote (@ddp/nn's checkpoint-binding); absent before. */
  save?: string;
  /** A digest of the parameters' names and shapes (nn's modelPart): pipeline stages differ; absent before. */
  modelPart?: string;
}

/** A rank's part of a checkpoint, copied to host memory. */
export interface Snapshot {
  /** `unit.<u>.param.<j>` and `unit.<u>.param.<j>.state.<key>`: parameter j of unit u's shard, its state. */
  tensors: Map<string, SafeTensor>;
  /** Scalar optimizer state (a step count) by `<u>.<j>`. */
  scalars: Record<string, Record<string, number>>;
  /** On rank 0: the replicated tensors and the manifest (its `shards` filled in at write). */
  replicated: Map<string, SafeTensor> | null;
  manifest: FSDPManifest | null;
}

/** The units of `root` in checkpoint order. */
export const unitsOf = (root: FSDPModule): FSDPModule[] => [root, ...root.subunits];

/** Each shard parameter → `<u>.<j>`: parameter j of unit u (the manifest's unit numbers). */
export const shardNames = (units: readonly FSDPModule[]): Map<Parameter, string> =>
  new Map(units.flatMap((u, i) => (u.flat?.shards ?? []).map((s, j) => [s, `${i}.${j}`] as const)));

/**
 * What REPLICATED_FILE holds, by module name: the parameters in no unit's shard and the
 * persistent buffers. The load expects exactly these.
 */
export function replicatedTensors(root: FSDPModule): [string, Tensor][] {
  const sharded = new Set(unitsOf(root).flatMap((u) => u.flat?.params ?? []));
  return [...root.module.namedParameters().filter(([, p]) => !sharded.has(p)), ...root.module.namedBuffers(true, true)];
}

/** Where a snapshot copies the float32 tensor `key` of `length` elements: an array it may overwrite. */
export type StagingBuffers = (key: string, length: number) => Float32Array;

const freshBuffers: StagingBuffers = (_, length) => new Float32Array(length);

/**
 * Copies this rank's shards, their optimizer state and (rank 0) the replicated tensors to host
 * memory: the float32 ones into `stage`'s arrays.
 */
export function snapshot(
  root: FSDPModule,
  optimizer: AnyOptimizer,
  step: number,
  extra: unknown,
  stage: StagingBuffers = freshBuffers,
): Snapshot {
  // on every rank, at the call: refused before any collective when JSON would change them (an eps of
  // Infinity became null in the copy below, silently)
  sealJson({ extra: extra ?? null, hyper: optimizer.paramGroups.map(({ params, ...hyper }) => hyper) });
  const units = unitsOf(root);
  const tensors = new Map<string, SafeTensor>();
  const hostCopy = (key: string, t: tf.Tensor) => {
    if (t.dtype !== 'float32') return tensors.set(key, toSafeTensor(t));
    const data = stage(key, t.size);
    copyTensorInto(t, data); // one copy straight out of the backend (dataSync may hand out its own storage)
    tensors.set(key, { dtype: 'float32', shape: [...t.shape], data });
  };
  const scalars: Snapshot['scalars'] = {};
  const names = shardNames(units);
  for (const [shard, name] of names) {
    const [u, j] = name.split('.');
    hostCopy(`unit.${u}.param.${j}`, shard.data);
    for (const [key, v] of Object.entries(optimizer.state.get(shard) ?? {})) {
      if (v instanceof tf.Tensor) hostCopy(`unit.${u}.param.${j}.state.${key}`, v);
      else {
        scalars[name] ??= {};
        scalars[name][key] = v;
      }
    }
  }
  if (root.processGroup.rank !== 0) return { tensors, scalars, replicated: null, manifest: null };
  const moduleNames = new Map(root.module.namedParameters().map(([n, p]) => [p, n]));
  const replicated = new Map<string, SafeTensor>(
    replicatedTensors(root).map(([n, t]): [string, SafeTensor] => [n, toSafeTensor(t.data)]),
  );
  const manifest: FSDPManifest = {
    format: 'ddp-fsdp-sharded-checkpoint',
    version: 3,
    worldSize: root.processGroup.size,
    step,
    units: units.map((u) => ({
      params: (u.flat?.params ?? []).map((p, j) => ({
        name: moduleNames.get(p as never) ?? `param.${j}`,
        shape: u.flat!.shapes[j],
      })),
    })),
    paramGroups: optimizer.paramGroups.map(({ params, ...hyper }) => ({
      ...hyper,
      params: params.map((p) => names.get(p)!.split('.').map(Number)),
    })),
    shards: [],
    kind: optimizer.stateKind(),
    extra: extra ?? null,
  };
  manifest.modelPart = modelPart(
    manifest.units.flatMap((u) => u.params.map((q) => `${q.name}[${q.shape}]`)),
    null,
  );
  // a copy, as the tensors are: a save not awaited while training went on wrote the `extra` (a loader
  // position) of a later step beside this step's weights
  return { tensors, scalars, replicated, manifest: JSON.parse(JSON.stringify(manifest)) as FSDPManifest };
}

/** Writes one safetensors file of a snapshot. */
export type ShardWriter = (
  path: string,
  tensors: Map<string, SafeTensor>,
  metadata: Record<string, string>,
) => Promise<void>;

const writeHere: ShardWriter = (path, tensors, metadata) => saveSafetensors(path, tensors, metadata);

/**
 * Writes a snapshot as a new entry of `dir` over `group` (collective on it); resolves with the
 * committed entry's path, on every rank. `tag` prefixes the crash points (`sync:` / `async:`)
 * for the tests; `expectNewest` is the save's SaveOptions value, `owner` what saved (its last
 * entry passes that check too); `write` writes the files (by default here, on the calling thread).
 */
export async function writeSnapshot(
  dir: string,
  snap: Snapshot,
  group: ProcessGroup,
  tag: string,
  turn: CommitTurn,
  { expectNewest, owner }: SaveOptions & { owner: object },
  write: ShardWriter = writeHere,
): Promise<string> {
  const { rank, size } = group;
  const entry = join(dir, await fromRank0(group, temporaryEntryName()));
  const save = basename(entry); // the id binding the entry's files (nn's checkpoint-binding)
  const failed = `FSDP checkpoint save (${dir})`;
  let committed = '';
  try {
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
        const metadata = withSaveId(save, { scalars: JSON.stringify(snap.scalars) });
        const shard = write(join(entry, shardFile(rank, size)), snap.tensors, metadata);
        const replicated =
          snap.replicated && write(join(entry, REPLICATED_FILE), snap.replicated, withSaveId(save, { format: 'pt' }));
        // both settled before a failure is raised: the clean-up removing the entry raced the other
        // write, which then left its file in a temporary entry nothing removed
        const failure = (await Promise.allSettled([shard, replicated])).find((r) => r.status === 'rejected');
        if (failure) throw failure.reason;
        crashPoint(`${tag}:shard-written`);
      },
      `${failed}: another rank failed to write its shard; the checkpoint is incomplete`,
    );
    // every rank waits its turn (their turns follow the same earlier saves): rank 0 alone would
    // leave the others in the commit's all-reduce for as long as an earlier async save runs
    await turn.ready;
    await onEveryRank(
      group,
      async () => {
        if (!snap.manifest) return;
        const shards = Array.from({ length: size }, (_, r) => shardFile(r, size));
        const manifest = { ...snap.manifest, shards, save };
        await writeFileAtomic(join(entry, MANIFEST_FILE), sealJson({ ...manifest }));
        crashPoint(`${tag}:before-commit`);
        const kind = { file: MANIFEST_FILE, format: 'ddp-fsdp-sharded-checkpoint' };
        const check = { where: failed, expectNewest, owner, part: manifest.modelPart! };
        committed = await commitManifestEntry(dir, entry, manifest.step, kind, check);
      },
      `${failed}: rank 0 failed to commit the checkpoint`,
    );
    return join(dir, await fromRank0(group, basename(committed)));
  } catch (error) {
    // nothing there once committed; a failure here (its dir not a directory) must not hide why the save failed
    if (rank === 0) await rm(entry, { recursive: true, force: true }).catch(() => {});
    throw error;
  }
}

/**
 * Refuses what an FSDP checkpoint does not keep: a scheduler or a generator (which nn's and ZeRO's
 * checkpoints take) passed through an untyped object was ignored, and the resumed run restarted
 * its schedule silently. And what it needs (`required`; a save without its optimizer was a TypeError).
 */
export function checkContents(where: string, contents: object, known: string[], required: string[] = []): void {
  const missing = required.filter((key) => (contents as Record<string, unknown>)[key] == null);
  if (missing.length > 0)
    throw new ShardedCheckpointError(`${where}: contents.${missing.join(', contents.')} missing (required)`);
  const unknown = Object.keys(contents).filter((key) => !known.includes(key));
  if (unknown.length === 0) return;
  throw new ShardedCheckpointError(
    `${where}: an FSDP checkpoint does not keep ${unknown.join(', ')}; keep their state in \`extra\` ` +
      '(scheduler.stateDict(), generator.getState()) and restore it yourself',
  );
}

/**
 * Saves a sharded checkpoint of `root` and its optimizer; collective over the root's group.
 * Resolves with the committed entry's path on every rank (`expectNewest` as nn's saveCheckpoint).
 */
export async function saveFSDPCheckpoint(
  dir: string,
  contents: { root: FSDPModule; optimizer: AnyOptimizer; step: number; extra?: unknown },
  { expectNewest }: SaveOptions = {},
): Promise<string> {
  checkContents('saveFSDPCheckpoint', contents, ['root', 'optimizer', 'step', 'extra'], ['root', 'optimizer', 'step']);
  // what a backward, step, summon or join loop not awaited still writes: the save held the state of before
  refusePendingGradients(
    `saveFSDPCheckpoint(${dir})`,
    contents.root.parameters(),
    (m) => new ShardedCheckpointError(m),
  );
  const snap = snapshot(contents.root, contents.optimizer, contents.step, contents.extra);
  const turn = takeCommitTurn(dir); // after an async save called before it: committed after it, so newer
  // on a group of its own, one save of this root's at a time: a save not awaited ran its collectives
  // among training's on the root's group (CollectiveMismatchError at 2 ranks)
  return afterPreviousSave(contents.root, async () => {
    try {
      const group = await checkpointGroupOf(contents.root);
      return await writeSnapshot(dir, snap, group, 'sync', turn, { expectNewest, owner: contents.root });
    } finally {
      turn.done();
    }
  });
}

/**
 * Sharded checkpoints for ZeroRedundancyOptimizer: every rank writes the optimizer state of
 * the parameters it owns (no gather on one rank), rank 0 writes the model and a manifest.
 * A save is a new entry of the checkpoint directory (@ddp/nn's checkpoint-dir: entries
 * committed by one rename, a `latest` pointer), written beside the previous checkpoint: the
 * manifest goes in after every rank has confirmed its shard, then rank 0 commits the entry.
 * A crash at any point leaves the previous checkpoint loadable. State is keyed by the
 * parameter's global index, so a checkpoint loads onto any world size (resharding).
 */
import { access, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Tensor } from '@ddp/autograd';
import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import {
  cleanCheckpointDir,
  commitEntry,
  crashPoint,
  createTemporaryEntry,
  entryToLoad,
  loadSafetensors,
  type Module,
  type OptimizerStateDict,
  optimizerParamNames,
  type ParamState,
  parameterOrderChange,
  readSealedJson,
  type SafeTensor,
  SealedJsonError,
  saveSafetensors,
  sealJson,
  temporaryEntryName,
  toSafeTensor,
  writeFileAtomic,
} from '@ddp/nn';
import { tensorFromTypedArray, tf } from '@ddp/tensor';
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
const VERSION = 2;

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
  extra: unknown;
}

type AnyZero = ZeroRedundancyOptimizer<{ lr: number }>;

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

function globalParams(zero: AnyZero): Tensor[] {
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

/**
 * Writes a sharded checkpoint of `optimizer` (and `model`) as a new entry of `dir`. Collective:
 * every rank of the optimizer's process group calls it; it returns once the entry is committed.
 */
export async function saveShardedCheckpoint(
  dir: string,
  contents: { model?: Module; optimizer: AnyZero; step: number; extra?: unknown },
): Promise<void> {
  const zero = contents.optimizer;
  const { rank, size } = zero.processGroup;
  const params = globalParams(zero);
  const index = new Map(params.map((p, i) => [p, i]));
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
        const tensors = new Map<string, SafeTensor>();
        const scalars: Record<string, Record<string, number>> = {};
        for (const [p, state] of zero.optim?.state ?? []) {
          const i = index.get(p)!;
          for (const [key, v] of Object.entries(state)) {
            if (v instanceof tf.Tensor) tensors.set(`state.${i}.${key}`, toSafeTensor(v));
            else {
              scalars[i] ??= {};
              scalars[i][key] = v;
            }
          }
        }
        await saveSafetensors(join(entry, shardFile(rank, size)), tensors, { scalars: JSON.stringify(scalars) });
        if (rank === 0) {
          const weights = contents.model
            ? [...contents.model.stateDict()].map(([k, t]): [string, SafeTensor] => [k, toSafeTensor(t)])
            : params.map((p, i): [string, SafeTensor] => [`param.${i}`, toSafeTensor(p.data)]);
          await saveSafetensors(join(entry, contents.model ? MODEL_FILE : PARAMS_FILE), weights, { format: 'pt' });
        }
        crashPoint('shard-written');
      },
      `${failed}: another rank failed to write its shard; the checkpoint is incomplete`,
    );

    await onEveryRank(
      zero.processGroup,
      async () => {
        if (rank !== 0) return;
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
          extra: contents.extra ?? null,
        };
        await writeFileAtomic(join(entry, MANIFEST_FILE), sealJson({ ...manifest }));
        await commitEntry(dir, entry, contents.step, MANIFEST_FILE);
      },
      `${failed}: rank 0 failed to commit the checkpoint`,
    );
  } catch (error) {
    if (rank === 0) await rm(entry, { recursive: true, force: true }); // nothing there once committed
    throw error;
  }
}

async function readManifest(dir: string): Promise<ShardedManifest> {
  const path = join(dir, MANIFEST_FILE);
  try {
    return (await readSealedJson(path, 'ddp-zero-sharded-checkpoint', VERSION)) as unknown as ShardedManifest;
  } catch (e) {
    throw e instanceof SealedJsonError ? new ShardedCheckpointError(e.message, path) : e;
  }
}

/** The newest committed entry of `location`. */
async function newestEntry(location: string): Promise<string> {
  const entry = await entryToLoad(location, MANIFEST_FILE);
  if (entry === null) {
    const why = `no complete sharded checkpoint at ${location}: no entry holds a ${MANIFEST_FILE}`;
    throw new ShardedCheckpointError(why, join(location, MANIFEST_FILE));
  }
  return entry;
}

/**
 * Loads the newest sharded checkpoint in `location`, written on any world size: each rank reads
 * the manifest and the shards holding the parameters its current partition owns, and keeps
 * their state only. Not collective. Everything is read and checked before anything changes.
 */
export async function loadShardedCheckpoint(
  location: string,
  contents: { model?: Module; optimizer: AnyZero },
): Promise<{ step: number; extra: unknown; worldSize: number; path: string }> {
  const zero = contents.optimizer;
  const dir = await newestEntry(location);
  const manifest = await readManifest(dir);
  const params = globalParams(zero);
  if (manifest.parameters.length !== params.length) {
    throw new ShardedCheckpointError(
      `${dir} holds ${manifest.parameters.length} parameters, the optimizer ${params.length}`,
      join(dir, MANIFEST_FILE),
    );
  }
  params.forEach((p, i) => {
    const saved = manifest.parameters[i];
    if (saved.shape.join(',') !== p.shape.join(',')) {
      throw new ShardedCheckpointError(
        `parameter ${i} (${saved.name}) has shape [${saved.shape}] in ${dir}, [${p.shape}] in the optimizer`,
        join(dir, MANIFEST_FILE),
      );
    }
  });
  // the model loads by name, the optimizer state by position: both must still pair alike
  if (contents.model && manifest.weights === MODEL_FILE) {
    const saved = manifest.parameters.map((p) => p.name);
    const change = parameterOrderChange(saved, optimizerParamNames(contents.model, zero.paramGroups));
    if (change) throw new ShardedCheckpointError(`${dir}: ${change}`, join(dir, MANIFEST_FILE));
  }
  // every rank checks every file, so all ranks fail alike on a damaged checkpoint
  for (const f of [...manifest.shards, manifest.weights]) {
    if (!(await exists(join(dir, f))))
      throw new ShardedCheckpointError(`sharded checkpoint ${dir} is missing ${f}`, join(dir, f));
  }

  const index = new Map(params.map((p, i) => [p, i]));
  const owned = zero.ownedParams.map((p) => index.get(p)!);
  const needed = new Set(owned.map((i) => manifest.parameters[i].shard));
  const created: tf.Tensor[] = [];
  const toTf = (t: SafeTensor) => {
    const out = tensorFromTypedArray(t.data, t.shape, t.dtype);
    created.push(out);
    return out;
  };
  // version 2 wrote every file with checksums: one without them is damaged
  const options = { requireChecksums: manifest.version === VERSION };
  try {
    const state = new Map<number, ParamState>();
    const wanted = new Set(owned);
    for (const s of needed) {
      const file = await loadSafetensors(join(dir, manifest.shards[s]), options);
      const scalars = JSON.parse(file.metadata?.scalars ?? '{}') as Record<string, Record<string, number>>;
      for (const [i, values] of Object.entries(scalars))
        if (wanted.has(Number(i))) state.set(Number(i), { ...state.get(Number(i)), ...values });
      for (const [name, t] of file.tensors) {
        const match = /^state\.(\d+)\.(.+)$/.exec(name);
        if (!match)
          throw new ShardedCheckpointError(
            `${manifest.shards[s]}: unexpected tensor '${name}'`,
            join(dir, manifest.shards[s]),
          );
        const i = Number(match[1]);
        if (wanted.has(i)) state.set(i, { ...state.get(i), [match[2]]: toTf(t) });
      }
    }
    const weights = await loadSafetensors(join(dir, manifest.weights), options);
    const sd = { state, paramGroups: manifest.paramGroups } as unknown as OptimizerStateDict<{ lr: number }>;
    if (contents.model && manifest.weights === MODEL_FILE) {
      contents.model.loadStateDict(new Map([...weights.tensors].map(([k, t]) => [k, toTf(t)])));
    } else {
      // no model given (or none saved): the parameters by their saved names
      params.forEach((p, i) => {
        const { name } = manifest.parameters[i];
        const t = weights.tensors.get(manifest.weights === PARAMS_FILE ? `param.${i}` : name);
        if (!t)
          throw new ShardedCheckpointError(
            `${manifest.weights} has no tensor for parameter ${i} (${name})`,
            join(dir, manifest.weights),
          );
        p.data = tensorFromTypedArray(t.data, t.shape, t.dtype);
      });
    }
    zero.loadStateDict(sd);
  } finally {
    tf.dispose(created);
  }
  return { step: manifest.step, extra: manifest.extra, worldSize: manifest.worldSize, path: dir };
}

/**
 * Loading a sharded ZeRO checkpoint (sharded-checkpoint.ts writes it) on any world size: each
 * rank reads the manifest and only the shards holding the parameters it now owns.
 */
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import {
  entryToLoad,
  type GeneratorState,
  loadedSave,
  loadSafetensors,
  type OptimizerStateDict,
  optimizerParamNames,
  type ParamState,
  parameterOrderChange,
  refuseOtherShards,
  type SafeTensor,
} from '@ddp/nn';
import { tensorFromTypedArray, tf } from '@ddp/tensor';
import { checkBound, latestManifestEntry, readManifest } from './manifest-read.js';
import {
  checkContents,
  globalParams,
  MANIFEST_FILE,
  MODEL_FILE,
  PARAMS_FILE,
  type ShardedCheckpointContents,
  ShardedCheckpointError,
  type ShardedManifest,
  VERSION,
} from './sharded-checkpoint.js';

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

const FORMAT = 'ddp-zero-sharded-checkpoint';

/**
 * The checkpoint loadShardedCheckpoint would read: the newest committed entry of `location`, or
 * null when there is none. Another kind's newest entry there (FSDP's, nn's) is refused, as on load.
 */
export const latestShardedCheckpoint = (location: string) => latestManifestEntry(location, FORMAT, VERSION);

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
  // step and extra allowed (not read: the load returns them), so one object serves save and load
  contents: ShardedCheckpointContents & { step?: number; extra?: unknown },
): Promise<{ step: number; extra: unknown; worldSize: number; path: string }> {
  checkContents(`loadShardedCheckpoint(${location})`, contents);
  const zero = contents.optimizer;
  const dir = await newestEntry(location);
  const manifest = await readManifest<ShardedManifest>(dir, FORMAT, VERSION);
  // asked to restore state the checkpoint lacks: refuse, or training resumes from a fresh one unnoticed
  const generator = contents.generator
    ? savedGenerator(manifest, zero.processGroup.rank, zero.processGroup.size, dir)
    : null;
  const held = { generator, scheduler: manifest.scheduler };
  const lacking = (['generator', 'scheduler'] as const).filter((k) => contents[k] && !held[k]);
  if (lacking.length)
    throw new ShardedCheckpointError(`${dir} holds no ${lacking.join(', ')} state`, join(dir, MANIFEST_FILE));
  // before anything changes (the optimizer's own check ran after the weights were loaded)
  if (manifest.kind !== undefined && manifest.kind !== zero.stateKind()) {
    throw new ShardedCheckpointError(
      `${dir} holds the state of ${manifest.kind}, not of ${zero.stateKind()}`,
      join(dir, MANIFEST_FILE),
    );
  }
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
  const damaged = (m: string) => new ShardedCheckpointError(m, join(dir, MANIFEST_FILE));
  refuseOtherShards(dir, manifest.parameterShards, contents.model?.parameters() ?? params, damaged);
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
      checkBound(dir, manifest, [[manifest.shards[s], file]]);
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
    checkBound(dir, manifest, [[manifest.weights, weights]]);
    const sd = { state, paramGroups: manifest.paramGroups, kind: manifest.kind } as unknown as OptimizerStateDict<{
      lr: number;
    }>;
    // the optimizer's and the scheduler's state checked before the weights change: a refused load left
    // the model loaded (and a `catch` that starts afresh trained the checkpoint's weights from step 0)
    try {
      zero.checkStateDict(sd);
      if (manifest.scheduler) contents.scheduler?.checkState(manifest.scheduler);
    } catch (e) {
      throw damaged(`${dir}: ${(e as Error).message}`);
    }
    if (contents.model && manifest.weights === MODEL_FILE) {
      contents.model.loadStateDict(new Map([...weights.tensors].map(([k, t]) => [k, toTf(t)])));
    } else {
      // no model given (or none saved): the parameters by their saved names, every one found first
      const values = params.map((_, i) => {
        const { name } = manifest.parameters[i];
        const t = weights.tensors.get(manifest.weights === PARAMS_FILE ? `param.${i}` : name);
        if (!t)
          throw new ShardedCheckpointError(
            `${manifest.weights} has no tensor for parameter ${i} (${name})`,
            join(dir, manifest.weights),
          );
        return t;
      });
      params.forEach((p, i) => {
        p.data = tensorFromTypedArray(values[i].data, values[i].shape, values[i].dtype);
      });
    }
    zero.loadStateDict(sd);
    zero.noteLoadedEntry(loadedSave(dir, manifest));
    if (manifest.scheduler) contents.scheduler?.loadStateDict(manifest.scheduler);
    if (generator) contents.generator?.setState(generator);
  } finally {
    tf.dispose(created);
  }
  return { step: manifest.step, extra: manifest.extra, worldSize: manifest.worldSize, path: dir };
}

/**
 * The generator state this rank resumes with: its own on the world size saved; on another, the
 * one every rank shared (refused when they differed: no rank's stream is the right one).
 */
function savedGenerator(manifest: ShardedManifest, rank: number, size: number, dir: string): GeneratorState | null {
  const states = manifest.generators;
  if (!states) return manifest.generator ?? null; // written before: rank 0's, for every rank
  if (manifest.worldSize === size) return states[rank];
  if (new Set(states.map((s) => JSON.stringify(s))).size === 1) return states[0];
  throw new ShardedCheckpointError(
    `${dir}: each of the ${manifest.worldSize} ranks saved a generator state of its own, so none is this rank's ` +
      `of ${size}; resume on ${manifest.worldSize} ranks, or seed the generators anew`,
    join(dir, MANIFEST_FILE),
  );
}

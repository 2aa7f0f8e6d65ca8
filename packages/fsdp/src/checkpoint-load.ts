import { join } from 'node:path';
import { whileWriting } from '@ddp/autograd';
import {
  entryToLoad,
  loadedSave,
  loadSafetensors,
  type OptimizerStateDict,
  type Parameter,
  type ParamState,
  type ParsedSafetensors,
  type SafeTensor,
} from '@ddp/nn';
import { tensorFromTypedArray, tf } from '@ddp/tensor';
import { checkBound, latestManifestEntry, readManifest, ShardedCheckpointError } from '@ddp/zero';
import { readChunk, type SavedChunk, savedGroupParams } from './checkpoint-read.js';
import {
  type AnyOptimizer,
  checkContents,
  type FSDPManifest,
  MANIFEST_FILE,
  REPLICATED_FILE,
  replicatedTensors,
  shardNames,
  unitsOf,
} from './checkpoint-save.js';
import { globalRank } from './errors.js';
import type { FSDPModule } from './fully-shard.js';
import { recordLoaded } from './same-start.js';

const FORMAT = 'ddp-fsdp-sharded-checkpoint';

/**
 * The checkpoint loadFSDPCheckpoint would read: the newest committed entry of `location`, or null
 * when there is none. Another kind's newest entry there (ZeRO's, nn's) is refused, as on load.
 */
export const latestFSDPCheckpoint = (location: string) => latestManifestEntry(location, FORMAT, 3);

/** The checkpoint's units must be this model's: same count, same parameters in the same order and shapes. */
function checkLayout(manifest: FSDPManifest, units: FSDPModule[], path: string): void {
  const saved = manifest.units.map((u) => u.params.map((p) => `${p.name}[${p.shape}]`).join(', '));
  const names = new Map(units[0].module.namedParameters().map(([n, p]) => [p, n]));
  const now = units.map((u) =>
    (u.flat?.params ?? []).map((p, j) => `${names.get(p as never) ?? `param.${j}`}[${u.flat!.shapes[j]}]`).join(', '),
  );
  const bad = saved.length !== now.length ? -1 : saved.findIndex((s, i) => s !== now[i]);
  if (saved.length !== now.length || bad >= 0) {
    const which =
      bad < 0
        ? `${saved.length} units, the model ${now.length}`
        : `unit ${bad} holds ${saved[bad]}, the model's ${now[bad]}`;
    throw new ShardedCheckpointError(`${path}: the checkpoint does not fit the model: ${which}`, path);
  }
}

/**
 * The replicated file must hold exactly what the save writes for this model (a buffer or frozen
 * parameter missing, extra or reshaped would otherwise be skipped or kept at its initial value).
 */
function checkReplicated(file: ParsedSafetensors, root: FSDPModule, path: string): void {
  const model = new Map(replicatedTensors(root).map(([n, t]) => [n, t.shape]));
  const missing = [...model.keys()].filter((k) => !file.tensors.has(k));
  const unexpected = [...file.tensors.keys()].filter((k) => !model.has(k));
  const reshaped = [...file.tensors]
    .filter(([k, t]) => model.has(k) && `${t.shape}` !== `${model.get(k)}`)
    .map(([k, t]) => `${k}: checkpoint [${t.shape.join(', ')}], model [${model.get(k)!.join(', ')}]`);
  if (missing.length + unexpected.length + reshaped.length === 0) return;
  const parts = [
    missing.length > 0 && `missing ${missing.join(', ')}`,
    unexpected.length > 0 && `unexpected ${unexpected.join(', ')}`,
    reshaped.length > 0 && `shapes differ: ${reshaped.join('; ')}`,
  ].filter(Boolean);
  const what = "the model's unsharded parameters and buffers";
  throw new ShardedCheckpointError(
    `rank ${globalRank(root.processGroup)}: ${path} does not fit ${what}: ${parts.join('; ')}`,
    path,
  );
}

/**
 * Loads the newest committed FSDP checkpoint in `location` into `root`'s shards and `optimizer`,
 * whatever world size wrote it (resharding): each rank reads only the saved shards that overlap
 * its new chunk of every parameter. The optimizer's state must be elementwise (SGD,
 * Adam, AdamW). Not collective. Everything is read and checked before anything changes.
 */
export async function loadFSDPCheckpoint(
  location: string,
  contents: { root: FSDPModule; optimizer?: AnyOptimizer },
): Promise<{ step: number; extra: unknown; worldSize: number; path: string }> {
  // not awaited, training went on and the load overwrote its steps (probe X): a step refuses until it ends
  const shards = (contents as { root?: Partial<FSDPModule> } | undefined)?.root?.parameters?.() ?? [];
  return whileWriting(shards, 'loadFSDPCheckpoint()', 'values', () => loadNow(location, contents));
}

async function loadNow(
  location: string,
  contents: { root: FSDPModule; optimizer?: AnyOptimizer },
): Promise<{ step: number; extra: unknown; worldSize: number; path: string }> {
  checkContents('loadFSDPCheckpoint', contents, ['root', 'optimizer'], ['root']);
  const entry = await entryToLoad(location, MANIFEST_FILE);
  if (entry === null)
    throw new ShardedCheckpointError(`no complete FSDP checkpoint at ${location}`, join(location, MANIFEST_FILE));
  const manifest = await readManifest<FSDPManifest>(entry, FORMAT, 3);
  const kind = contents.optimizer?.stateKind();
  if (kind !== undefined && manifest.kind !== undefined && manifest.kind !== kind) {
    throw new ShardedCheckpointError(
      `${entry} holds the state of ${manifest.kind}, not of ${kind}`,
      join(entry, MANIFEST_FILE),
    );
  }
  const units = unitsOf(contents.root);
  checkLayout(manifest, units, join(entry, MANIFEST_FILE));
  const files = new Map<number, ParsedSafetensors>();
  // version 2 sealed its manifest and every safetensors header: a file without checksums is damage
  const options = { requireChecksums: manifest.version !== 1 };
  const shardOf = async (k: number) => {
    if (!files.has(k)) {
      const file = await loadSafetensors(join(entry, manifest.shards[k]), options);
      checkBound(entry, manifest, [[manifest.shards[k], file]]);
      files.set(k, file);
    }
    return files.get(k)!;
  };
  const { rank } = contents.root.processGroup;
  const me = globalRank(contents.root.processGroup);
  // each shard's new chunk, from the saved chunks (or flat shards) that overlap it
  const values = new Map<Parameter, SavedChunk>();
  for (const [u, unit] of units.entries()) {
    for (const [j, shard] of (unit.flat?.shards ?? []).entries()) {
      const size = unit.flat!.chunks[j];
      values.set(shard, await readChunk(entry, manifest, shardOf, { u, j, rank: me }, rank * size, size));
    }
  }
  const replicated = await loadSafetensors(join(entry, REPLICATED_FILE), options);
  checkBound(entry, manifest, [[REPLICATED_FILE, replicated]]);
  checkReplicated(replicated, contents.root, join(entry, REPLICATED_FILE));

  const created: tf.Tensor[] = [];
  const toTf = (data: Float32Array | SafeTensor, shape: number[]) => {
    const t =
      data instanceof Float32Array
        ? tf.tensor(data, shape, 'float32')
        : tensorFromTypedArray(data.data, data.shape, data.dtype);
    created.push(t);
    return t;
  };
  try {
    // the optimizer's state is built and checked, and loaded, before the model changes: a refusal
    // after the shards were written left a half-loaded model behind a caught error
    if (contents.optimizer) {
      const opt = contents.optimizer;
      const position = new Map(opt.paramGroups.flatMap((g) => g.params).map((p, i) => [p, i]));
      const state = new Map<number, ParamState>();
      for (const [shard, chunk] of values) {
        const s: ParamState = { ...chunk.scalars };
        for (const [key, data] of Object.entries(chunk.state)) s[key] = toTf(data, [data.length]);
        if (Object.keys(s).length > 0) state.set(position.get(shard)!, s);
      }
      // in this optimizer's own order: a group listing its shards in another order than the saved one
      // took the moments of one parameter into another of the same size, silently
      const names = shardNames(units);
      const paramGroups = manifest.paramGroups.map((g, gi) => {
        const here = opt.paramGroups[gi]?.params ?? [];
        const saved = savedGroupParams(manifest, g.params as unknown[]).sort();
        const mine = here.map((p) => names.get(p) ?? '(not a shard)').sort();
        if (`${saved}` !== `${mine}`)
          throw new ShardedCheckpointError(
            `rank ${me}: ${entry}: the optimizer's group ${gi} holds the shards of parameters [${mine}] ` +
              `(unit.parameter), the checkpoint's [${saved}]`,
            entry,
          );
        return { ...g, params: here.map((p) => position.get(p)!) };
      });
      opt.loadStateDict({ state, paramGroups } as unknown as OptimizerStateDict<{ lr: number }>);
    }
    // non-strict: the sharded parameters are not in this file (checked above against exactly what it must hold)
    contents.root.module.loadStateDict(new Map([...replicated.tensors].map(([k, t]) => [k, toTf(t, t.shape)])), false);
    for (const [shard, { value }] of values) shard.data = tf.tensor(value, [value.length], 'float32');
    recordLoaded(units, loadedSave(entry, manifest));
  } finally {
    tf.dispose(created);
  }
  return { step: manifest.step, extra: manifest.extra, worldSize: manifest.worldSize, path: entry };
}

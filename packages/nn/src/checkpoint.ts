/**
 * Training checkpoints: a directory holding model.safetensors, optimizer.safetensors and
 * checkpoint.json (step, epoch, generator and scheduler state, optimizer hyperparameters and scalars).
 * The directory is built beside the target and renamed into place, so a crash leaves either
 * the previous checkpoint or the new one, never a mix; if it strikes between the two renames,
 * the previous one is at `<dir>.old-*`, where loadCheckpoint finds it.
 */
import { mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { tensorFromTypedArray, tf } from '@ddp/tensor';
import { syncDirectory, temporarySibling, writeFileAtomic } from './atomic.js';
import type { Generator, GeneratorState } from './generator.js';
import type { LRScheduler, SchedulerState } from './lr-scheduler.js';
import type { Module } from './module.js';
import type { Optimizer, OptimizerStateDict, ParamState } from './optim/optimizer.js';
import { loadSafetensors, type SafeTensor, saveSafetensors, toSafeTensor } from './safetensors.js';

export const MODEL_FILE = 'model.safetensors';
export const OPTIMIZER_FILE = 'optimizer.safetensors';
export const META_FILE = 'checkpoint.json';

export class CheckpointError extends Error {
  override name = 'CheckpointError';
}

// biome-ignore lint/suspicious/noExplicitAny: any optimizer's hyperparameters
type AnyOptimizer = Optimizer<any>;

export interface CheckpointContents {
  model: Module;
  optimizer?: AnyOptimizer;
  step?: number;
  epoch?: number;
  generator?: Generator;
  scheduler?: LRScheduler;
  /** Anything else JSON-serialisable (metrics, data-loader position). */
  extra?: unknown;
}

interface CheckpointMeta {
  format: 'ddp-checkpoint';
  version: 1;
  step: number;
  epoch: number;
  generator: GeneratorState | null;
  scheduler: SchedulerState | null;
  optimizer: { paramGroups: unknown[]; scalars: Record<string, Record<string, number>> } | null;
  extra: unknown;
}

function optimizerTensors(sd: OptimizerStateDict<{ lr: number }>) {
  const tensors = new Map<string, SafeTensor>();
  const scalars: Record<string, Record<string, number>> = {};
  for (const [i, state] of sd.state) {
    for (const [key, v] of Object.entries(state)) {
      if (v instanceof tf.Tensor) tensors.set(`state.${i}.${key}`, toSafeTensor(v));
      else {
        scalars[i] ??= {};
        scalars[i][key] = v;
      }
    }
  }
  return { tensors, scalars };
}

/** Writes a checkpoint directory atomically (see the module comment). */
export async function saveCheckpoint(dir: string, contents: CheckpointContents): Promise<void> {
  const tmp = temporarySibling(dir);
  await mkdir(tmp, { recursive: true });
  try {
    const model = new Map([...contents.model.stateDict()].map(([k, t]) => [k, toSafeTensor(t)]));
    await saveSafetensors(join(tmp, MODEL_FILE), model, { format: 'pt' });
    let optimizer: CheckpointMeta['optimizer'] = null;
    if (contents.optimizer) {
      const sd = contents.optimizer.stateDict();
      const { tensors, scalars } = optimizerTensors(sd);
      await saveSafetensors(join(tmp, OPTIMIZER_FILE), tensors);
      optimizer = { paramGroups: sd.paramGroups, scalars };
    }
    const meta: CheckpointMeta = {
      format: 'ddp-checkpoint',
      version: 1,
      step: contents.step ?? 0,
      epoch: contents.epoch ?? 0,
      generator: contents.generator?.getState() ?? null,
      scheduler: contents.scheduler?.stateDict() ?? null,
      optimizer,
      extra: contents.extra ?? null,
    };
    await writeFileAtomic(join(tmp, META_FILE), `${JSON.stringify(meta, null, 2)}\n`);
    await syncDirectory(tmp);
    const exists = await stat(dir).then(() => true, () => false);
    const old = temporarySibling(dir, 'old');
    if (exists) await rename(dir, old);
    await rename(tmp, dir);
    await syncDirectory(dirname(dir));
    if (exists) await rm(old, { recursive: true, force: true });
  } catch (error) {
    await rm(tmp, { recursive: true, force: true });
    throw error;
  }
}

/** The directory to read: `dir`, or the previous checkpoint left by a crash mid-swap. */
async function locate(dir: string): Promise<string> {
  if (await stat(join(dir, META_FILE)).then(() => true, () => false)) return dir;
  const prefix = `${basename(dir)}.old-`;
  const parent = dirname(dir);
  const olds = (await readdir(parent).catch(() => [] as string[])).filter((f) => f.startsWith(prefix));
  for (const f of olds) if (await stat(join(parent, f, META_FILE)).then(() => true, () => false)) return join(parent, f);
  throw new CheckpointError(`no checkpoint at ${dir} (no ${META_FILE})`);
}

function parseMeta(text: string, path: string): CheckpointMeta {
  let meta: CheckpointMeta;
  try {
    meta = JSON.parse(text) as CheckpointMeta;
  } catch (error) {
    throw new CheckpointError(`${path} is not valid JSON: ${(error as Error).message}`);
  }
  if (meta?.format !== 'ddp-checkpoint' || meta.version !== 1) throw new CheckpointError(`${path} is not a ddp checkpoint (version 1)`);
  return meta;
}

export interface LoadedCheckpoint {
  step: number;
  epoch: number;
  extra: unknown;
  /** The directory actually read (a `.old-*` sibling after an interrupted save). */
  path: string;
}

/**
 * Restores what `contents` names from a checkpoint: the model (strict), then the optimizer
 * and generator when given. All files are read and parsed before anything is changed, and
 * each of model and optimizer is checked whole before it is changed.
 */
export async function loadCheckpoint(
  dir: string,
  contents: { model: Module; optimizer?: AnyOptimizer; generator?: Generator; scheduler?: LRScheduler; strict?: boolean },
): Promise<LoadedCheckpoint> {
  const path = await locate(dir);
  const meta = parseMeta(await readFile(join(path, META_FILE), 'utf8'), join(path, META_FILE));
  if (contents.optimizer && !meta.optimizer) throw new CheckpointError(`${path} holds no optimizer state`);
  const model = await loadSafetensors(join(path, MODEL_FILE));
  const optimizer = contents.optimizer ? await loadSafetensors(join(path, OPTIMIZER_FILE)) : null;
  const owned: tf.Tensor[] = [];
  const toTf = (t: SafeTensor) => {
    const out = tensorFromTypedArray(t.data, t.shape, t.dtype);
    owned.push(out);
    return out;
  };
  try {
    const modelState = new Map([...model.tensors].map(([k, t]) => [k, toTf(t)]));
    let optimizerState: OptimizerStateDict<{ lr: number }> | null = null;
    if (optimizer && meta.optimizer) {
      const state = new Map<number, ParamState>();
      for (const [i, scalars] of Object.entries(meta.optimizer.scalars)) state.set(Number(i), { ...scalars });
      for (const [name, t] of optimizer.tensors) {
        const match = /^state\.(\d+)\.(.+)$/.exec(name);
        if (!match) throw new CheckpointError(`${join(path, OPTIMIZER_FILE)}: unexpected tensor '${name}'`);
        const i = Number(match[1]);
        state.set(i, { ...state.get(i), [match[2] as string]: toTf(t) });
      }
      optimizerState = { state, paramGroups: meta.optimizer.paramGroups as OptimizerStateDict<{ lr: number }>['paramGroups'] };
    }
    contents.model.loadStateDict(modelState, contents.strict ?? true);
    if (optimizerState) contents.optimizer?.loadStateDict(optimizerState);
    if (contents.generator && meta.generator) contents.generator.setState(meta.generator);
    if (contents.scheduler && meta.scheduler) contents.scheduler.loadStateDict(meta.scheduler);
  } finally {
    tf.dispose(owned);
  }
  return { step: meta.step, epoch: meta.epoch, extra: meta.extra, path };
}

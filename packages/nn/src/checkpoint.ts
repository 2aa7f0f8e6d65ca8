/**
 * Training checkpoints: each one an entry of a checkpoint directory (checkpoint-dir.ts) holding
 * model.safetensors, optimizer.safetensors and checkpoint.json (step, epoch, generator and
 * scheduler state, optimizer hyperparameters and scalars; written last, with a checksum of its own
 * as the safetensors files' tensors and metadata have: sealed-json.ts). An entry is written
 * whole and fsynced before one rename commits it, so a crash at any point leaves the previous
 * checkpoint or the new one, never a mix, and loading always finds the newest committed one.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { whileWriting } from '@ddp/autograd';
import { checkBooleanOptions, checkOptionNames, tensorFromTypedArray, tf } from '@ddp/tensor';
import { writeFileAtomic } from './atomic.js';
import { unboundEntry, withSaveId } from './checkpoint-binding.js';
import {
  checkStep,
  cleanCheckpointDir,
  commitEntry,
  crashPoint,
  createTemporaryEntry,
  latestEntry,
  readNewestEntry,
} from './checkpoint-dir.js';
import { CheckpointError } from './checkpoint-errors.js';
import {
  optimizerParamNames,
  optimizerStateTensors,
  parameterOrderChange,
  refuseParamsOutsideModel,
} from './checkpoint-order.js';
import { modelPart, refuseOtherPart, refuseOtherShards, shardsHeld } from './checkpoint-parts.js';
import { temporaryEntryName } from './checkpoint-temporaries.js';
import { noteCommitted, refuseOtherRun } from './commit-refusals.js';
import { takeCommitTurn } from './commit-turn.js';
import type { Generator, GeneratorState } from './generator.js';
import { loadedSave, noteLoadedSave } from './loaded-saves.js';
import type { LRScheduler, SchedulerState } from './lr-scheduler.js';
import { Module } from './module.js';
import { type Optimizer, type OptimizerStateDict, type ParamState, refusePendingGradients } from './optim/optimizer.js';
import { type SafeTensor, saveSafetensors, toSafeTensor } from './safetensors.js';
import { loadSafetensors } from './safetensors-read.js';
import { readSealedJson, SealedJsonError, sealJson } from './sealed-json.js';

export const MODEL_FILE = 'model.safetensors';
export const OPTIMIZER_FILE = 'optimizer.safetensors';
export const META_FILE = 'checkpoint.json';

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

export interface SaveOptions {
  /**
   * The entry this run last saved or loaded (null: none): the commit is refused unless it is still the
   * directory's newest (another run saving there would have its checkpoints deleted by this clean-up).
   */
  expectNewest?: string | null;
}

const SAVED = ['model', 'optimizer', 'step', 'epoch', 'generator', 'scheduler', 'extra'];

// an unknown key refused: `{ model, optimiser }` built ahead of the call passed TypeScript, the optimizer unsaved
function checkContents(where: string, contents: object, known: string[], options?: SaveOptions): void {
  const error = (m: string) => new CheckpointError(m);
  checkOptionNames(where, contents, known, error, 'key');
  if (options) checkOptionNames(where, options, ['expectNewest'], error);
  // a wrapper given as the model (`ddp` for `ddp.module`) failed untyped, deep inside (probe AL)
  const { model } = contents as { model?: unknown };
  if (!(model instanceof Module))
    throw error(
      `${where}: the model is ${model?.constructor?.name ?? model}, not an nn Module: give the Module ` +
        "itself (a DistributedDataParallel's .module)",
    );
}

/** 2: checkpoint.json and the safetensors metadata carry checksums (1: written before they did). */
const VERSION = 2;

interface CheckpointMeta {
  format: 'ddp-checkpoint';
  version: 1 | 2;
  step: number;
  epoch: number;
  generator: GeneratorState | null;
  scheduler: SchedulerState | null;
  optimizer: {
    paramGroups: unknown[];
    scalars: Record<string, Record<string, number>>;
    /** The model's name of each optimizer parameter, by position (null: not the model's); absent before. */
    paramNames?: (string | null)[];
    /** The optimizer's class; absent before it was saved. */
    kind?: string;
  } | null;
  extra: unknown;
  /** Which parts of split parameters (tensor-parallel shards) the model held; absent before it was saved. */
  parameterShards?: string | null;
  /** Digest of the model's tensor names and shards (checkpoint-parts.ts); absent before it was saved. */
  modelPart?: string;
  /** The id of the save, in every file it wrote (checkpoint-binding.ts); absent before it was saved. */
  save?: string;
}

/**
 * Writes a checkpoint as a new entry of `dir` and commits it (see the module comment); older
 * entries and leftovers of killed saves are removed after the commit. Returns the committed
 * entry's path. A failed write (a full disk) raises a typed error naming the file and leaves the
 * previous checkpoint as it was.
 */
export async function saveCheckpoint(
  dir: string,
  contents: CheckpointContents,
  options: SaveOptions = {},
): Promise<string> {
  checkContents(`saveCheckpoint(${dir})`, contents, SAVED, options);
  const { expectNewest } = options;
  // everything is copied before the first await: training that goes on while the save writes
  // saved a model of one step and an optimizer of another under the step given (silently)
  checkStep(contents.step ?? 0);
  // the weights a backward, step or join loop not awaited still writes: the save held those of before
  refusePendingGradients(`saveCheckpoint(${dir})`, contents.model.parameters(), (m) => new CheckpointError(m));
  if (contents.optimizer)
    refuseParamsOutsideModel(`saveCheckpoint(${dir})`, contents.model, contents.optimizer.paramGroups);
  const model = new Map([...contents.model.stateDict()].map(([k, t]) => [k, toSafeTensor(t)]));
  const sd = contents.optimizer?.stateDict();
  const { tensors, scalars } = sd ? optimizerStateTensors(sd.state) : { tensors: null, scalars: {} };
  const shards = shardsHeld(contents.model.parameters());
  const part = modelPart(model.keys(), shards);
  const save = temporaryEntryName(); // the entry's name while written, and the id binding its files
  const meta: CheckpointMeta = {
    format: 'ddp-checkpoint',
    version: VERSION,
    step: contents.step ?? 0,
    epoch: contents.epoch ?? 0,
    generator: contents.generator?.getState() ?? null,
    scheduler: contents.scheduler?.stateDict() ?? null,
    optimizer:
      sd && contents.optimizer
        ? {
            paramGroups: sd.paramGroups,
            kind: sd.kind,
            scalars,
            paramNames: optimizerParamNames(contents.model, contents.optimizer.paramGroups),
          }
        : null,
    extra: contents.extra ?? null,
    parameterShards: shards,
    modelPart: part,
    save,
  };
  const metaText = sealJson({ ...meta });
  const turn = takeCommitTurn(dir); // still before the first await: saves commit in the order of their calls
  let tmp: string | null = null;
  try {
    await cleanCheckpointDir(dir, META_FILE);
    tmp = await createTemporaryEntry(dir, save);
    crashPoint('entry-created');
    await saveSafetensors(join(tmp, MODEL_FILE), model, withSaveId(save, { format: 'pt' }));
    crashPoint('model-written');
    if (tensors) await saveSafetensors(join(tmp, OPTIMIZER_FILE), tensors, withSaveId(save));
    await writeFileAtomic(join(tmp, META_FILE), metaText);
    await turn.ready;
    const committed = await commitEntry(dir, tmp, meta.step, META_FILE, async (newest) => {
      refuseOtherRun(`saveCheckpoint(${dir})`, expectNewest, contents.model)(newest);
      const read = newest && readSealedJson(join(newest, META_FILE), 'ddp-checkpoint', VERSION).catch(() => null);
      refuseOtherPart(`saveCheckpoint(${dir})`, dir, read ? await read : null, meta.step, part);
    });
    noteCommitted(contents.model, committed);
    return committed;
  } catch (error) {
    if (tmp) await rm(tmp, { recursive: true, force: true });
    // an fs error of the directory's own (mkdir, rename): typed, naming what failed
    if (typeof (error as NodeJS.ErrnoException).syscall === 'string') {
      throw new CheckpointError(`saveCheckpoint(${dir}): ${(error as Error).message}`, { cause: error });
    }
    throw error;
  } finally {
    turn.done();
  }
}

/**
 * The checkpoint loadCheckpoint would read: the newest complete entry of `dir` (or a checkpoint
 * of the old single-directory layout), or null when there is none.
 */
export async function latestCheckpoint(dir: string): Promise<string | null> {
  return latestEntry(dir, META_FILE);
}

export interface LoadedCheckpoint {
  step: number;
  epoch: number;
  extra: unknown;
  /** The entry actually read. */
  path: string;
  /** With `strict: false`: the model's keys the file lacked, and the file's keys the model lacked (torch's). */
  missingKeys: string[];
  unexpectedKeys: string[];
}

/** The files of one checkpoint entry, read and checked; the optimizer's only when `contents` has one. */
async function readEntry(
  path: string,
  contents: { optimizer?: AnyOptimizer; generator?: Generator; scheduler?: LRScheduler },
) {
  const meta = (await readSealedJson(join(path, META_FILE), 'ddp-checkpoint', VERSION).catch((error) => {
    throw error instanceof SealedJsonError ? new CheckpointError(error.message, { cause: error }) : error;
  })) as unknown as CheckpointMeta;
  // asked to restore state the checkpoint lacks: refuse, or training resumes from a fresh one unnoticed
  const lacking = (['optimizer', 'generator', 'scheduler'] as const).filter((k) => contents[k] && !meta[k]);
  if (lacking.length) throw new CheckpointError(`${path} holds no ${lacking.join(', ')} state`);
  // version 2 wrote every safetensors file with checksums: one without them is damaged
  const options = { requireChecksums: meta.version === VERSION };
  const model = await loadSafetensors(join(path, MODEL_FILE), options);
  const optimizer = contents.optimizer ? await loadSafetensors(join(path, OPTIMIZER_FILE), options) : null;
  const unbound = unboundEntry(path, meta, META_FILE, [
    [MODEL_FILE, model],
    [OPTIMIZER_FILE, optimizer],
  ]);
  if (unbound) throw new CheckpointError(unbound.message);
  return { path, meta, model, optimizer };
}

/**
 * Restores what `contents` names from a checkpoint: the model (strict), then the optimizer
 * and generator when given. All files are read and parsed before anything is changed, and
 * each of model and optimizer is checked whole before it is changed. `step`, `epoch` and `extra` are
 * not read (the load returns them): one contents object serves save and load.
 */
export async function loadCheckpoint(dir: string, contents: LoadContents): Promise<LoadedCheckpoint> {
  // not awaited, training went on and the load overwrote its steps (probe X): a step refuses until it ends
  const params = (contents as Partial<LoadContents> | undefined)?.model?.parameters?.() ?? [];
  return whileWriting(params, 'loadCheckpoint()', 'values', () => loadNow(dir, contents));
}

type LoadContents = CheckpointContents & { strict?: boolean };

async function loadNow(dir: string, contents: LoadContents): Promise<LoadedCheckpoint> {
  // step, epoch and extra are what the load returns: one contents object may serve save and load
  checkContents(`loadCheckpoint(${dir})`, contents, [...SAVED, 'strict']);
  checkBooleanOptions(`loadCheckpoint(${dir})`, contents, ['strict'], (message) => new CheckpointError(message));
  const read = await readNewestEntry(dir, META_FILE, (path) => readEntry(path, contents));
  if (read === null) throw new CheckpointError(`no checkpoint at ${dir}`);
  const { path, meta, model, optimizer } = read;
  const owned: tf.Tensor[] = [];
  let keys = { missingKeys: [] as string[], unexpectedKeys: [] as string[] };
  const toTf = (t: SafeTensor) => {
    const out = tensorFromTypedArray(t.data, t.shape, t.dtype);
    owned.push(out);
    return out;
  };
  try {
    const modelState = new Map([...model.tensors].map(([k, t]) => [k, toTf(t)]));
    contents.model.checkStateDict(modelState, contents.strict ?? true);
    let optimizerState: OptimizerStateDict<{ lr: number }> | null = null;
    if (optimizer && meta.optimizer) {
      const state = new Map<number, ParamState>();
      for (const [i, scalars] of Object.entries(meta.optimizer.scalars)) state.set(Number(i), { ...scalars });
      for (const [name, t] of optimizer.tensors) {
        const match = /^state\.(\d+)\.(.+)$/.exec(name);
        if (!match) throw new CheckpointError(`${join(path, OPTIMIZER_FILE)}: unexpected tensor '${name}'`);
        const i = Number(match[1]);
        state.set(i, { ...state.get(i), [match[2]]: toTf(t) });
      }
      optimizerState = {
        state,
        paramGroups: meta.optimizer.paramGroups as OptimizerStateDict<{ lr: number }>['paramGroups'],
        kind: meta.optimizer.kind,
      };
    }
    if (contents.optimizer && meta.optimizer) {
      refuseParamsOutsideModel(path, contents.model, contents.optimizer.paramGroups);
      const now = optimizerParamNames(contents.model, contents.optimizer.paramGroups);
      const change = parameterOrderChange(meta.optimizer.paramNames, now);
      if (change) throw new CheckpointError(`${path}: ${change}`);
    }
    refuseOtherShards(path, meta.parameterShards, contents.model.parameters(), (m) => new CheckpointError(m));
    // the optimizer and scheduler checked before the model changes: a refused load leaves all as they were
    if (optimizerState) contents.optimizer?.checkStateDict(optimizerState);
    if (meta.scheduler) contents.scheduler?.checkState(meta.scheduler);
    // returned: a strict: false load that matched no key (a 'module.' prefix) changed nothing, silently
    keys = contents.model.loadStateDict(modelState, contents.strict ?? true);
    if (optimizerState) contents.optimizer?.loadStateDict(optimizerState);
    if (meta.generator) contents.generator?.setState(meta.generator);
    if (meta.scheduler) contents.scheduler?.loadStateDict(meta.scheduler);
    noteLoadedSave(contents.model, loadedSave(path, meta));
  } finally {
    tf.dispose(owned);
  }
  return { step: meta.step, epoch: meta.epoch, extra: meta.extra, path, ...keys };
}

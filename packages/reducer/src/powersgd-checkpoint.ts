/**
 * PowerSGD's state in a safetensors file of each rank's own (its error feedback is that rank's),
 * saved beside a checkpoint and bound to its step: torch pickles its PowerSGDState per rank.
 */
import { type GeneratorState, loadSafetensors, type SafeTensor, saveSafetensors } from '@ddp/nn';
import { DDPUsageError } from './errors.js';
import type { PowerSGDState, PowerSGDStateDict, SavedPowerSGDParameter } from './powersgd.js';

const KEY = 'ddp.powersgd';
const TENSOR = /^(error|q)\.(\d+)$/;

interface SavedHeader extends Omit<PowerSGDStateDict, 'parameters'> {
  step: number;
  generators: Record<string, GeneratorState>;
}

/** Writes this rank's PowerSGD state to `path` (atomically), recording the training step it belongs to. */
export async function savePowerSGDState(path: string, state: PowerSGDState, { step }: { step: number }): Promise<void> {
  if (!Number.isSafeInteger(step) || step < 0)
    throw new DDPUsageError(`savePowerSGDState(${path}): step must be a non-negative integer, got ${step}`);
  const { parameters, ...rest } = state.stateDict();
  const tensors = new Map<string, SafeTensor>();
  const generators: Record<string, GeneratorState> = {};
  const vector = (data: Float32Array): SafeTensor => ({ dtype: 'float32', shape: [data.length], data });
  for (const [index, { error, q, generator }] of parameters) {
    if (error) tensors.set(`error.${index}`, vector(error));
    if (q) tensors.set(`q.${index}`, vector(q));
    if (generator) generators[index] = generator;
  }
  const header: SavedHeader = { ...rest, step, generators };
  await saveSafetensors(path, tensors, { [KEY]: JSON.stringify(header) });
}

/**
 * Loads a state savePowerSGDState wrote into a fresh `state` (made with the same options), before
 * the first backward. `step` is the step the model's checkpoint was loaded at: a state of another
 * step is refused, as is (at the first compression) one another rank or world size saved.
 */
export async function loadPowerSGDState(path: string, state: PowerSGDState, { step }: { step: number }): Promise<void> {
  const { tensors, metadata } = await loadSafetensors(path, { requireChecksums: true });
  const fail = (why: string) => new DDPUsageError(`loadPowerSGDState(${path}): ${why}`);
  if (metadata[KEY] === undefined) throw fail(`not a PowerSGD state (no ${KEY} metadata)`);
  const { generators, step: saved, ...rest } = JSON.parse(metadata[KEY]) as SavedHeader;
  if (saved !== step)
    throw fail(`the state is of step ${saved}, the model was loaded at step ${step}: save both at one step`);
  const parameters = new Map<number, SavedPowerSGDParameter>();
  const entry = (index: number) => parameters.get(index) ?? parameters.set(index, {}).get(index)!;
  for (const [name, t] of tensors) {
    const match = TENSOR.exec(name);
    if (match === null || !(t.data instanceof Float32Array)) throw fail(`unexpected tensor ${name} (${t.dtype})`);
    entry(Number(match[2]))[match[1] as 'error' | 'q'] = t.data;
  }
  for (const [index, generator] of Object.entries(generators)) entry(Number(index)).generator = generator;
  state.loadStateDict({ ...rest, parameters });
}

import { join } from 'node:path';
import type { ParsedSafetensors } from '@ddp/nn';
import { ShardedCheckpointError } from '@ddp/zero';
import type { FSDPManifest } from './checkpoint-save.js';

/** A parameter's chunk as a checkpoint held it: its values and its optimizer state's tensors, by key. */
export interface SavedChunk {
  value: Float32Array;
  state: Record<string, Float32Array>;
  scalars: Record<string, number>;
}

/**
 * Where a checkpoint keeps parameter j of unit u, in either layout: its elements at `base + e` of
 * a sequence cut into chunks of `chunk` elements, rank k's file holding [k·chunk, (k+1)·chunk) as
 * the tensor `value`, its optimizer state as `state` + key and its scalars under `scalars`. Version 3
 * cut each parameter on its own; versions 1 and 2 cut each unit's parameters back to back.
 */
function savedPlace(manifest: FSDPManifest, u: number, j: number) {
  const { params, shardSize } = manifest.units[u];
  if (manifest.version === 3) {
    const chunk = Math.ceil(sizeOf(params[j].shape) / manifest.worldSize);
    const value = `unit.${u}.param.${j}`;
    return { base: 0, chunk, value, state: `${value}.state.`, scalars: `${u}.${j}` };
  }
  const base = params.slice(0, j).reduce((sum, p) => sum + sizeOf(p.shape), 0);
  return { base, chunk: shardSize ?? 0, value: `unit.${u}.shard`, state: `unit.${u}.state.`, scalars: `${u}` };
}

/**
 * This rank's chunk of parameter j of unit u, elements [from, from + size) of the parameter (zeros
 * past its end: padding), with its optimizer state, read from the saved files that overlap it: at
 * least one, which names the state when the chunk is all padding.
 */
export async function readChunk(
  entry: string,
  manifest: FSDPManifest,
  fileOf: (k: number) => Promise<ParsedSafetensors>,
  where: { u: number; j: number; rank: number },
  from: number,
  size: number,
): Promise<SavedChunk> {
  const { u, j, rank } = where;
  const elements = sizeOf(manifest.units[u].params[j].shape);
  const place = savedPlace(manifest, u, j);
  const [start, end] = [place.base + Math.min(from, elements), place.base + Math.min(from + size, elements)];
  const files = manifest.shards.length;
  const first = place.chunk === 0 ? 0 : Math.min(Math.floor(start / place.chunk), files - 1);
  // the value under '' beside the state's keys, until they part at the end
  const tensors: Record<string, Float32Array> = {};
  let scalars: Record<string, number> = {};
  for (let k = first; k < files && (k === first || k * place.chunk < end); k++) {
    const file = await fileOf(k);
    const [lo, hi] = [Math.max(start, k * place.chunk), Math.min(end, (k + 1) * place.chunk)];
    for (const [name, t] of file.tensors) {
      const isValue = name === place.value;
      if (!isValue && !name.startsWith(place.state)) continue;
      if (t.dtype !== 'float32' || t.data.length !== place.chunk) {
        const path = join(entry, manifest.shards[k]);
        const is = `${t.dtype}[${t.data.length}]`;
        throw new ShardedCheckpointError(
          `rank ${rank}: ${path}: ${name} is ${is}, the manifest's chunk is float32[${place.chunk}]`,
          path,
        );
      }
      const key = isValue ? '' : name.slice(place.state.length);
      tensors[key] ??= new Float32Array(size);
      if (hi > lo)
        tensors[key].set((t.data as Float32Array).subarray(lo - k * place.chunk, hi - k * place.chunk), lo - start);
    }
    const saved = JSON.parse(file.metadata.scalars ?? '{}') as Record<string, Record<string, number>>;
    scalars = saved[place.scalars] ?? scalars;
  }
  const { '': value, ...state } = tensors;
  if (!value) {
    throw new ShardedCheckpointError(
      `${entry}: no shard of unit ${u} covers elements [${from}, ${from + size}) of its parameter ${j}`,
      entry,
    );
  }
  return { value, state, scalars };
}

/** The checkpoint's optimizer group `params` as `<u>.<j>` names (versions 1 and 2 list whole units). */
export function savedGroupParams(manifest: FSDPManifest, params: unknown[]): string[] {
  if (manifest.version === 3) return (params as [number, number][]).map(([u, j]) => `${u}.${j}`);
  return (params as number[]).flatMap((u) => manifest.units[u].params.map((_, j) => `${u}.${j}`));
}

const sizeOf = (shape: number[]) => shape.reduce((a, b) => a * b, 1);

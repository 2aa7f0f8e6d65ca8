import { readFileSync } from 'node:fs';

export interface GoldenTensor {
  shape: number[];
  data: number[];
}
export interface BatchNormGolden {
  inputs: Record<'x' | 'weight' | 'bias' | 'running_mean' | 'running_var' | 'dy', GoldenTensor>;
  outputs: Record<'y' | 'running_mean' | 'running_var' | 'dx' | 'dweight' | 'dbias', GoldenTensor>;
  /** torch's own float32 error on each output, where the float64 values are beyond float32's reach */
  float32_error?: Record<string, number>;
}

export function loadGolden(name: string): BatchNormGolden {
  return JSON.parse(readFileSync(new URL(`../fixtures/${name}.json`, import.meta.url), 'utf8')) as BatchNormGolden;
}

/** Rows [start, start + count) of an NCHW tensor's batch dim, flattened. */
export function batchRows(t: GoldenTensor, start: number, count: number): number[] {
  const row = t.data.length / t.shape[0];
  return t.data.slice(start * row, (start + count) * row);
}

// Test-only: the fixture's GradScaler run (SGD on a Linear(4, 2) through overflowing batches).
import { readFileSync } from 'node:fs';
import { linear, mse, type Tensor, tensor } from '@ddp/autograd';
import { SGD } from '@ddp/nn';
import type { GradScaler, GradScalerOptions } from '../index.js';

export interface ScalerFixture {
  options: { init_scale: number; growth_factor: number; backoff_factor: number; growth_interval: number };
  lr: number;
  initial: { weight: number[]; bias: number[] };
  batches: number[][];
  targets: number[][];
  steps: {
    skipped: boolean;
    scale: number;
    growthTracker: number;
    weight: number[];
    bias: number[];
    unscaledWeightGrad: number[] | null;
  }[];
  stateDict: {
    scale: number;
    growthFactor: number;
    backoffFactor: number;
    growthInterval: number;
    growthTracker: number;
  };
}

export const scalerFixture = (
  JSON.parse(readFileSync(new URL('../fixtures/amp.json', import.meta.url), 'utf8')) as { gradScaler: ScalerFixture }
).gradScaler;

export function scalerOptions(extra: GradScalerOptions = {}): GradScalerOptions {
  const o = scalerFixture.options;
  return {
    initScale: o.init_scale,
    growthFactor: o.growth_factor,
    backoffFactor: o.backoff_factor,
    growthInterval: o.growth_interval,
    ...extra,
  };
}

/** The fixture's model and optimizer, fresh. */
export function makeModel(): { weight: Tensor; bias: Tensor; optimizer: SGD } {
  const weight = tensor(scalerFixture.initial.weight, [2, 4], { requiresGrad: true });
  const bias = tensor(scalerFixture.initial.bias, [2], { requiresGrad: true });
  return { weight, bias, optimizer: new SGD([weight, bias], { lr: scalerFixture.lr }) };
}

/** The scaled loss of batch i (its backward leaves scaled gradients). */
export function scaledLoss(scaler: GradScaler, weight: Tensor, bias: Tensor, i: number): Tensor {
  const x = tensor(scalerFixture.batches[i], [3, 4]);
  const y = tensor(scalerFixture.targets[i], [3, 2]);
  const loss = scaler.scale(mse(linear(x, weight, bias), y));
  x.dispose();
  y.dispose();
  return loss;
}

import type { Tensor } from '@ddp/autograd';
import { checkBooleanOptions, fusedAdamStep, tf } from '@ddp/tensor';
import {
  checkOptimizerOptions,
  type GroupCheck,
  Optimizer,
  OptimizerError,
  type ParamGroup,
  type ParamGroupInput,
  type ParamState,
} from './optimizer.js';

export interface AdamOptions {
  lr: number;
  betas: [number, number];
  eps: number;
  weightDecay: number;
  amsgrad: boolean;
  maximize: boolean;
}

const adamNames = ['lr', 'betas', 'eps', 'weightDecay', 'amsgrad', 'maximize'] as const;

/** Adam's and AdamW's values, of the options and of each group. */
const adamGroupCheck: GroupCheck<AdamOptions> = {
  names: adamNames,
  state: ['step', 'expAvg', 'expAvgSq', 'maxExpAvgSq'],
  values(o, where) {
    if (!(typeof o.lr === 'number' && o.lr >= 0)) throw new OptimizerError(`${where}: invalid learning rate ${o.lr}`);
    // typeof: ['0.9', '0.999'] from a config passed the range check and failed in the update kernel
    const beta = (b: unknown) => typeof b === 'number' && b >= 0 && b < 1;
    if (!(Array.isArray(o.betas) && o.betas.length === 2 && o.betas.every(beta)))
      throw new OptimizerError(`${where}: invalid betas ${o.betas}`);
    if (!(typeof o.eps === 'number' && o.eps >= 0)) throw new OptimizerError(`${where}: invalid eps ${o.eps}`);
    if (!(typeof o.weightDecay === 'number' && o.weightDecay >= 0))
      throw new OptimizerError(`${where}: invalid weightDecay ${o.weightDecay} (must be >= 0)`);
    checkBooleanOptions(where, o, ['amsgrad', 'maximize'], (message) => new OptimizerError(message));
  },
};

function adamDefaults(name: string, options: Partial<AdamOptions>, weightDecay: number): AdamOptions {
  checkOptimizerOptions(name, options, adamNames);
  const known = { lr: 1e-3, betas: [0.9, 0.999] as [number, number], eps: 1e-8, weightDecay };
  const o = { ...known, amsgrad: false, maximize: false, ...options };
  adamGroupCheck.values(o, name);
  return o;
}

/**
 * The Adam moment update shared by Adam and AdamW (torch.optim's _single_tensor_adam); `decay`
 * multiplies the parameter first (AdamW's decoupled weight decay). One native pass where the
 * native kernels run (the same float32 results), tfjs ops otherwise.
 */
function adamStep(
  g: ParamGroup<AdamOptions>,
  param: tf.Tensor,
  grad: tf.Tensor,
  state: ParamState,
  l2: number,
  decay = 1,
) {
  const [beta1, beta2] = g.betas;
  const step = ((state.step as number | undefined) ?? 0) + 1;
  const m0 = (state.expAvg as tf.Tensor | undefined) ?? tf.zerosLike(param);
  const v0 = (state.expAvgSq as tf.Tensor | undefined) ?? tf.zerosLike(param);
  const stepSize = g.lr / (1 - beta1 ** step);
  const sqrtBiasCorrection2 = Math.sqrt(1 - beta2 ** step);
  if (!g.maximize && !g.amsgrad && l2 === 0) {
    const fused = fusedAdamStep(param, grad, m0, v0, {
      decay,
      beta1,
      beta2,
      eps: g.eps,
      stepSize,
      sqrtBiasCorrection2,
    });
    if (fused) return { param: fused[0], step, expAvg: fused[1], expAvgSq: fused[2] };
  }
  if (decay !== 1) param = tf.mul(param, decay);
  let d = g.maximize ? tf.neg(grad) : grad;
  if (l2 !== 0) d = tf.add(d, tf.mul(param, l2));
  const expAvg = lerp(m0, d, 1 - beta1);
  // (1 − β2)·d·d in that order, as torch's addcmul: d² alone overflowed float32 from |d| ≈ 1.8e19, and an
  // infinite moment froze the parameter for good (probe BY)
  const expAvgSq = tf.add(tf.mul(v0, beta2), tf.mul(tf.mul(d, 1 - beta2), d));
  const out: { param: tf.Tensor } & ParamState = { param, step, expAvg, expAvgSq };
  let second = expAvgSq;
  if (g.amsgrad) {
    const prevMax = state.maxExpAvgSq as tf.Tensor | undefined;
    second = prevMax ? tf.maximum(prevMax, expAvgSq) : tf.clone(expAvgSq);
    out.maxExpAvgSq = second;
  }
  const denom = tf.add(tf.div(tf.sqrt(second), sqrtBiasCorrection2), g.eps);
  out.param = tf.sub(param, tf.mul(tf.div(expAvg, denom), stepSize));
  return out;
}

/**
 * torch.lerp(start, end, weight) with its two formulas: from the far end when weight ≥ 0.5, so weight 1
 * (β1 = 0, as GANs use) gives `end` exactly; start + (end − start)·1 lost a small gradient against a
 * large moment (probe BY). `1 − weight` in float32, as torch and the native kernel compute it.
 */
function lerp(start: tf.Tensor, end: tf.Tensor, weight: number): tf.Tensor {
  // the test on the float32 weight, as torch's and the native kernel's (β1 just above 0.5 rounds to 0.5)
  if (Math.abs(Math.fround(weight)) < 0.5) return tf.add(start, tf.mul(tf.sub(end, start), weight));
  return tf.sub(end, tf.mul(tf.sub(end, start), Math.fround(1 - Math.fround(weight))));
}

/** torch.optim.Adam; weightDecay is L2, added to the gradient. */
export class Adam extends Optimizer<AdamOptions> {
  constructor(params: Tensor[] | ParamGroupInput<AdamOptions>[], options: Partial<AdamOptions> = {}) {
    super(params, adamDefaults('Adam', options, 0), adamGroupCheck);
  }

  protected update(g: ParamGroup<AdamOptions>, param: tf.Tensor, grad: tf.Tensor, state: ParamState) {
    return adamStep(g, param, grad, state, g.weightDecay);
  }
}

/** torch.optim.AdamW; weightDecay is decoupled: p ← p·(1 − lr·wd) before the Adam step. */
export class AdamW extends Optimizer<AdamOptions> {
  constructor(params: Tensor[] | ParamGroupInput<AdamOptions>[], options: Partial<AdamOptions> = {}) {
    super(params, adamDefaults('AdamW', options, 1e-2), adamGroupCheck);
  }

  protected update(g: ParamGroup<AdamOptions>, param: tf.Tensor, grad: tf.Tensor, state: ParamState) {
    return adamStep(g, param, grad, state, 0, g.weightDecay !== 0 ? 1 - g.lr * g.weightDecay : 1);
  }
}

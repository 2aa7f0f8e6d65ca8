import { tf } from '@ddp/tensor';
import type { Tensor } from '@ddp/autograd';
import { Optimizer, OptimizerError, type ParamGroup, type ParamGroupInput, type ParamState } from './optimizer.js';

export interface AdamOptions {
  lr: number;
  betas: [number, number];
  eps: number;
  weightDecay: number;
  amsgrad: boolean;
  maximize: boolean;
}

function adamDefaults(options: Partial<AdamOptions>, weightDecay: number): AdamOptions {
  const o = { lr: 1e-3, betas: [0.9, 0.999] as [number, number], eps: 1e-8, weightDecay, amsgrad: false, maximize: false, ...options };
  if (!(typeof o.lr === 'number' && o.lr >= 0)) throw new OptimizerError(`invalid learning rate ${o.lr}`);
  if (!o.betas.every((b) => b >= 0 && b < 1)) throw new OptimizerError(`invalid betas ${o.betas}`);
  if (o.eps < 0) throw new OptimizerError(`invalid eps ${o.eps}`);
  return o;
}

/** The Adam moment update shared by Adam and AdamW (torch.optim's _single_tensor_adam). */
function adamStep(g: ParamGroup<AdamOptions>, param: tf.Tensor, grad: tf.Tensor, state: ParamState, l2: number) {
  const [beta1, beta2] = g.betas;
  const step = ((state.step as number | undefined) ?? 0) + 1;
  let d = g.maximize ? tf.neg(grad) : grad;
  if (l2 !== 0) d = tf.add(d, tf.mul(param, l2));
  const m0 = (state.expAvg as tf.Tensor | undefined) ?? tf.zerosLike(param);
  const v0 = (state.expAvgSq as tf.Tensor | undefined) ?? tf.zerosLike(param);
  const expAvg = tf.add(m0, tf.mul(tf.sub(d, m0), 1 - beta1)); // lerp, as torch
  const expAvgSq = tf.add(tf.mul(v0, beta2), tf.mul(tf.square(d), 1 - beta2));
  const out: { param: tf.Tensor } & ParamState = { param, step, expAvg, expAvgSq };
  let second = expAvgSq;
  if (g.amsgrad) {
    const prevMax = state.maxExpAvgSq as tf.Tensor | undefined;
    second = prevMax ? tf.maximum(prevMax, expAvgSq) : tf.clone(expAvgSq);
    out.maxExpAvgSq = second;
  }
  const stepSize = g.lr / (1 - beta1 ** step);
  const denom = tf.add(tf.div(tf.sqrt(second), Math.sqrt(1 - beta2 ** step)), g.eps);
  out.param = tf.sub(param, tf.mul(tf.div(expAvg, denom), stepSize));
  return out;
}

/** torch.optim.Adam; weightDecay is L2, added to the gradient. */
export class Adam extends Optimizer<AdamOptions> {
  constructor(params: Tensor[] | ParamGroupInput<AdamOptions>[], options: Partial<AdamOptions> = {}) {
    super(params, adamDefaults(options, 0));
  }

  protected update(g: ParamGroup<AdamOptions>, param: tf.Tensor, grad: tf.Tensor, state: ParamState) {
    return adamStep(g, param, grad, state, g.weightDecay);
  }
}

/** torch.optim.AdamW; weightDecay is decoupled: p ← p·(1 − lr·wd) before the Adam step. */
export class AdamW extends Optimizer<AdamOptions> {
  constructor(params: Tensor[] | ParamGroupInput<AdamOptions>[], options: Partial<AdamOptions> = {}) {
    super(params, adamDefaults(options, 1e-2));
  }

  protected update(g: ParamGroup<AdamOptions>, param: tf.Tensor, grad: tf.Tensor, state: ParamState) {
    const decayed = g.weightDecay !== 0 ? tf.mul(param, 1 - g.lr * g.weightDecay) : param;
    return adamStep(g, decayed, grad, state, 0);
  }
}

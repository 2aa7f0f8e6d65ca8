import type { Tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import {
  checkOptimizerOptions,
  Optimizer,
  OptimizerError,
  type ParamGroup,
  type ParamGroupInput,
  type ParamState,
} from './optimizer.js';

export interface SGDOptions {
  lr: number;
  momentum: number;
  dampening: number;
  weightDecay: number;
  nesterov: boolean;
  maximize: boolean;
}

/** torch.optim.SGD: L2 weight decay added to the gradient, heavy-ball or Nesterov momentum. */
export class SGD extends Optimizer<SGDOptions> {
  constructor(params: Tensor[] | ParamGroupInput<SGDOptions>[], options: Partial<SGDOptions> & { lr: number }) {
    const optional = { momentum: 0, dampening: 0, weightDecay: 0, nesterov: false, maximize: false };
    checkOptimizerOptions('SGD', options, params, ['lr', ...Object.keys(optional)]);
    const defaults = { ...optional, ...options };
    if (!(typeof defaults.lr === 'number' && defaults.lr >= 0))
      throw new OptimizerError(`SGD needs a learning rate lr >= 0, got ${defaults.lr}`);
    // torch refuses these too: a negative momentum or decay steps away from the minimum
    if (!(defaults.momentum >= 0))
      throw new OptimizerError(`SGD: invalid momentum ${defaults.momentum} (must be >= 0)`);
    if (!(defaults.weightDecay >= 0))
      throw new OptimizerError(`SGD: invalid weightDecay ${defaults.weightDecay} (must be >= 0)`);
    if (defaults.nesterov && (defaults.momentum <= 0 || defaults.dampening !== 0)) {
      throw new OptimizerError('Nesterov momentum requires a momentum and zero dampening');
    }
    super(params, defaults);
  }

  protected update(g: ParamGroup<SGDOptions>, param: tf.Tensor, grad: tf.Tensor, state: ParamState) {
    let d = g.maximize ? tf.neg(grad) : grad;
    if (g.weightDecay !== 0) d = tf.add(d, tf.mul(param, g.weightDecay));
    const out: { param: tf.Tensor } & ParamState = { param };
    if (g.momentum !== 0) {
      const prev = state.momentumBuffer as tf.Tensor | undefined;
      const buf = prev ? tf.add(tf.mul(prev, g.momentum), tf.mul(d, 1 - g.dampening)) : tf.clone(d);
      out.momentumBuffer = buf;
      d = g.nesterov ? tf.add(d, tf.mul(buf, g.momentum)) : buf;
    }
    out.param = tf.sub(param, tf.mul(d, g.lr));
    return out;
  }
}

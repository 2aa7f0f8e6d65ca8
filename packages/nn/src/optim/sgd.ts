import type { Tensor } from '@ddp/autograd';
import { checkBooleanOptions, tf } from '@ddp/tensor';
import {
  checkOptimizerOptions,
  type GroupCheck,
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

const sgdNames = ['lr', 'momentum', 'dampening', 'weightDecay', 'nesterov', 'maximize'] as const;

/** SGD's values, of the options and of each group. */
const sgdGroupCheck: GroupCheck<SGDOptions> = {
  names: sgdNames,
  state: ['momentumBuffer'],
  values(o, where) {
    if (!(typeof o.lr === 'number' && o.lr >= 0))
      throw new OptimizerError(`${where} needs a learning rate lr >= 0, got ${o.lr}`);
    // torch refuses these too: a negative momentum or decay steps away from the minimum
    if (!(typeof o.momentum === 'number' && o.momentum >= 0))
      throw new OptimizerError(`${where}: invalid momentum ${o.momentum} (must be >= 0)`);
    if (!(typeof o.dampening === 'number' && Number.isFinite(o.dampening)))
      throw new OptimizerError(`${where}: invalid dampening ${o.dampening}`);
    if (!(typeof o.weightDecay === 'number' && o.weightDecay >= 0))
      throw new OptimizerError(`${where}: invalid weightDecay ${o.weightDecay} (must be >= 0)`);
    checkBooleanOptions(where, o, ['nesterov', 'maximize'], (message) => new OptimizerError(message));
    if (o.nesterov && (o.momentum <= 0 || o.dampening !== 0)) {
      throw new OptimizerError(`${where}: Nesterov momentum requires a momentum and zero dampening`);
    }
  },
};

/** torch.optim.SGD: L2 weight decay added to the gradient, heavy-ball or Nesterov momentum. */
export class SGD extends Optimizer<SGDOptions> {
  constructor(params: Tensor[] | ParamGroupInput<SGDOptions>[], options: Partial<SGDOptions> & { lr: number }) {
    checkOptimizerOptions('SGD', options, sgdNames);
    const defaults = { momentum: 0, dampening: 0, weightDecay: 0, nesterov: false, maximize: false, ...options };
    sgdGroupCheck.values(defaults, 'SGD');
    super(params, defaults, sgdGroupCheck);
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

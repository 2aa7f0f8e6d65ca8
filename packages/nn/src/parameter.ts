import { Tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';

/** A leaf Tensor a Module registers as trainable (torch.nn.Parameter); requiresGrad by default. */
export class Parameter extends Tensor {
  constructor(data: tf.Tensor, requiresGrad = true) {
    super(data, { requiresGrad });
  }

  /** A parameter of `shape` holding `values` (e.g. from an init function). */
  static fromValues(values: Float32Array, shape: number[], requiresGrad = true): Parameter {
    return new Parameter(tf.tensor(values, shape, 'float32'), requiresGrad);
  }
}

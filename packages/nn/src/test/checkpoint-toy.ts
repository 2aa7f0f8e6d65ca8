import { Tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import type { Generator } from '../generator.js';
import { Module } from '../module.js';
import type { Adam } from '../optim/adam.js';
import { Parameter } from '../parameter.js';

/** Two parameters and an int32 buffer: enough state for a checkpoint. */
export class Toy extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter;
  constructor(gen: Generator) {
    super();
    this.weight = this.registerParameter('weight', Parameter.fromValues(gen.normal(6), [2, 3]));
    this.bias = this.registerParameter('bias', Parameter.fromValues(gen.normal(2), [2]));
    this.registerBuffer('count', new Tensor(tf.tensor([3], [1], 'int32')));
  }
  forward(): never {
    throw new Error('not used');
  }
}

/** `steps` Adam steps on gradients drawn from `gen`. */
export function trainSteps(model: Toy, opt: Adam, gen: Generator, steps: number): void {
  for (let s = 0; s < steps; s++) {
    for (const p of model.parameters()) p.grad = tf.tensor(gen.normal(p.size), p.shape);
    opt.step();
  }
}

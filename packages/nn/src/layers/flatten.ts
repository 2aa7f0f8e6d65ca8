import { flatten, type Tensor } from '@ddp/autograd';
import { Module } from '../module.js';

/** nn.Flatten: merges dims startDim..endDim (default: all but the batch dim). */
export class Flatten extends Module {
  constructor(
    readonly startDim = 1,
    readonly endDim = -1,
  ) {
    super();
  }
  forward(x: Tensor): Tensor {
    return flatten(x, this.startDim, this.endDim);
  }
}

import { crossEntropy, mse, type Tensor } from '@ddp/autograd';
import { Module } from './module.js';
import { checkModuleOptions } from './module-options.js';

export { crossEntropy, mse };

type Reduction = 'mean' | 'sum' | 'none';

/** nn.CrossEntropyLoss: logits [N, C] against integer labels [N]. */
export class CrossEntropyLoss extends Module {
  constructor(readonly options: { ignoreIndex?: number; reduction?: Reduction } = {}) {
    super();
    checkModuleOptions('CrossEntropyLoss', options, ['ignoreIndex', 'reduction']);
  }
  forward(logits: Tensor, labels: Parameters<typeof crossEntropy>[1]): Tensor {
    return crossEntropy(logits, labels, this.options);
  }
}

/** nn.MSELoss. */
export class MSELoss extends Module {
  constructor(readonly options: { reduction?: Reduction } = {}) {
    super();
    checkModuleOptions('MSELoss', options, ['reduction']);
  }
  forward(input: Tensor, target: Tensor): Tensor {
    return mse(input, target, this.options);
  }
}

import { type Tensor, tensor } from '@ddp/autograd';
import { Adam, AdamW, Generator, Linear, type Module, mse, Sequential, SGD, Tanh, type TensorModule } from '@ddp/nn';

export const WIDTH = 8;
export const DEPTH = 6;
export const OPTIMIZERS = { adam: Adam, adamw: AdamW, sgd: SGD } as const;
export type OptimizerName = keyof typeof OPTIMIZERS;
export const OPTIONS: Record<OptimizerName, { lr: number; [k: string]: number }> = {
  adam: { lr: 0.01 },
  adamw: { lr: 0.01, weightDecay: 0.1 },
  sgd: { lr: 0.05, momentum: 0.9 },
};

/** Six equal Linear(8, 8) layers: the sorted-greedy partition splits them evenly over 2 and 3 ranks. */
export function makeModel(): Sequential {
  const gen = new Generator(7);
  const layers: TensorModule[] = [];
  for (let i = 0; i < DEPTH; i++) layers.push(new Linear(WIDTH, WIDTH, { generator: gen }), new Tanh());
  return new Sequential(...layers);
}

/** Rank r's batch for step t (4 rows), the same on every process that asks. */
export function batch(t: number, r: number): { x: Tensor; y: Tensor } {
  const gen = new Generator(1000 + 97 * t + r);
  const x = tensor(gen.normal(4 * WIDTH), [4, WIDTH]);
  const y = tensor(gen.normal(4 * WIDTH, 0, 0.5), [4, WIDTH]);
  return { x, y };
}

export function lossOf(model: { forward(x: Tensor): Tensor }, t: number, r: number): Tensor {
  const { x, y } = batch(t, r);
  const loss = mse(model.forward(x), y);
  x.dispose();
  y.dispose();
  return loss;
}

export function flatParams(model: Module): number[] {
  return model.parameters().flatMap((p) => [...(p.data.dataSync() as Float32Array)]);
}

import { Generator } from '../generator.js';
import { Linear } from '../layers/linear.js';

/** The model checkpoint-crash.test.ts saves at `step`: weights drawn from the step, so each step's differ. */
export function modelAtStep(step: number): Linear {
  return new Linear(16, 8, { generator: new Generator(1000 + step) });
}

import { checkBooleanOptions, checkNumberOptions, checkOptionNames } from '@ddp/tensor';
import { ModuleError } from './module.js';

/** A layer's options besides those it knows (`unknown`, the rest of its destructuring) raise ModuleError. */
export function checkModuleOptions(layer: string, unknown: object, known: readonly string[]): void {
  checkOptionNames(layer, unknown, known, (message) => new ModuleError(message));
}

/**
 * A layer's options argument, refused unless it is an object: torch's positional arguments
 * (`new Linear(3, 2, false)`, `new LayerNorm(4, 1e-6)`, `new Conv2d(1, 4, 3, 2, 1)`) landed in
 * the options' place, where a number or boolean destructures to nothing — bias kept, eps,
 * stride and padding at their defaults, silently. Its `booleans` must be booleans when given
 * (`bias: 'false'` from a config kept the bias), its `numbers` numbers (`eps: '1e-5'` failed in a kernel).
 */
export function moduleOptions<T extends object>(
  layer: string,
  opts: T,
  booleans: readonly string[] = [],
  numbers: readonly string[] = [],
): T {
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts))
    throw new ModuleError(
      `${layer}: options must be an object of named options, got ${String(opts)} ` +
        "(torch's positional arguments are named here)",
    );
  checkBooleanOptions(layer, opts, booleans, (message) => new ModuleError(message));
  checkNumberOptions(layer, opts, numbers, (message) => new ModuleError(message));
  return opts;
}

import { checkOptionNames } from '@ddp/tensor';
import { ModuleError } from './module.js';

/** A layer's options besides those it knows (`unknown`, the rest of its destructuring) raise ModuleError. */
export function checkModuleOptions(layer: string, unknown: object, known: readonly string[]): void {
  checkOptionNames(layer, unknown, known, (message) => new ModuleError(message));
}

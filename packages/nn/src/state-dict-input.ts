import { Tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { kindOf, ModuleError } from './module-errors.js';

/**
 * loadStateDict's input as tf tensors by key: autograd Tensors (another model's
 * namedParameters()) are read through their data; anything else is refused.
 */
export function incomingState(state: Map<string, tf.Tensor> | Record<string, tf.Tensor | Tensor>) {
  const entries = state instanceof Map ? [...state] : Object.entries(state);
  const incoming = new Map(entries.map(([k, v]) => [k, v instanceof Tensor ? v.data : v]));
  const odd = [...incoming].find(([, v]) => !(v instanceof tf.Tensor));
  if (odd) throw new ModuleError(`loadStateDict: '${odd[0]}' is ${kindOf(odd[1])}, not a tensor`);
  // a stateDict() taken before an optimizer step holds the tensors the step replaced (was: an untyped TypeError)
  const gone = [...incoming].filter(([, v]) => v.isDisposed).map(([k]) => `'${k}'`);
  if (gone.length > 0)
    throw new ModuleError(
      `loadStateDict: ${gone.join(', ')} disposed: stateDict() lends the module's own tensors, which an ` +
        'optimizer step or a load replaces; clone them to keep a state dict (tf.clone of each value)',
    );
  return incoming;
}

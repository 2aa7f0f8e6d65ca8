/** Tensor hooks as backward runs them: each may replace the gradient it is lent. */
import { tf } from '@ddp/tensor';
import { GradientHookError } from './errors.js';
import type { FunctionNode } from './function.js';
import type { TensorHook } from './node.js';
import { Tensor } from './tensor.js';

/** tfjs numbers tensors in creation order: a tensor numbered below the mark existed before it was taken. */
export const tensorMark = (): number =>
  (tf.engine().constructor as unknown as { nextTensorId?: number }).nextTensorId ?? 0;

/**
 * Runs a tensor's hooks in order; each may replace the gradient (the old one is disposed). A
 * replacement that existed before the hook ran is the caller's: the engine takes a clone (it took
 * the tensor itself, and zeroing .grad disposed the user's tensor). One of another shape or dtype
 * is refused, as torch's (an int32 one became the leaf's .grad).
 */
export function runTensorHooks(t: Tensor | undefined, grad: tf.Tensor): tf.Tensor {
  if (t === undefined) return grad;
  for (const hook of t.hooks) {
    const mark = tensorMark();
    let replaced: tf.Tensor | null | undefined;
    try {
      const result: unknown = hook(grad);
      refuseUnusableHookResult(hook, t, result);
      replaced = result;
    } catch (error) {
      grad.dispose(); // the engine's: nothing else frees it once backward fails
      throw error;
    }
    if (replaced instanceof tf.Tensor && replaced !== grad) {
      if (replaced.id < mark) replaced = replaced.clone();
      const changed = !tf.util.arraysEqual(replaced.shape, grad.shape)
        ? `the shape of the gradient (was [${grad.shape}], got [${replaced.shape}])`
        : replaced.dtype !== grad.dtype
          ? `the type of the gradient (was ${grad.dtype}, got ${replaced.dtype})`
          : null;
      grad.dispose();
      if (changed !== null) {
        replaced.dispose();
        throw new GradientHookError(
          `hook '${hook.name || 'anonymous'}' on ${t} has changed ${changed}; return a gradient of the same ` +
            'shape and dtype as the one it received',
        );
      }
      grad = replaced;
    }
  }
  return grad;
}

/**
 * A hook returns a gradient or nothing: an async hook's promise (or an autograd Tensor) was dropped,
 * the gradient left as it was, silently (probe AY).
 */
function refuseUnusableHookResult(
  hook: TensorHook,
  t: Tensor,
  result: unknown,
): asserts result is tf.Tensor | null | undefined {
  if (result === undefined || result === null || result instanceof tf.Tensor) return; // null: as torch's None
  const what =
    result instanceof Promise
      ? 'a Promise (tensor hooks run synchronously)'
      : result instanceof Tensor
        ? 'an autograd Tensor (return its .data)'
        : `${typeof result} ${String(result)}`;
  throw new GradientHookError(
    `hook '${hook.name || 'anonymous'}' on ${t} returned ${what}; return a tf.Tensor gradient or nothing ` +
      '(to await work on a gradient, use a post-accumulate-grad hook)',
  );
}

/** A node's incoming gradients through its outputs' hooks (zeros where none came); on a throw none is left over. */
export function hookedGradOutputs(node: FunctionNode, incoming: (tf.Tensor | null)[]): tf.Tensor[] {
  const out: tf.Tensor[] = [];
  try {
    for (const [i, g] of incoming.entries()) {
      incoming[i] = null; // runTensorHooks owns it now
      out.push(g === null ? tf.zeros(node.outputShapes[i]) : runTensorHooks(node.outputs[i], g));
    }
  } catch (error) {
    for (const g of [...out, ...incoming]) g?.dispose();
    throw error;
  }
  return out;
}

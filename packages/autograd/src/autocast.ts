import { AsyncLocalStorage } from 'node:async_hooks';
import { roundToPrecision, type tf } from '@ddp/tensor';
import { AutogradArgumentError, checkOptions } from './errors.js';
import { AutogradFunction } from './function.js';
import type { Context } from './node.js';
import type { Tensor } from './tensor.js';

/** The lower precisions autocast runs its ops in (PyTorch's CPU autocast: bfloat16). */
export type AutocastDtype = 'bfloat16' | 'float16';

export interface AutocastOptions {
  /** Default: the enclosing autocast's dtype (even a disabled one's), else 'bfloat16', as torch.autocast('cpu'). */
  dtype?: AutocastDtype;
  /** false runs fn in float32 (a region excluded from an enclosing autocast). */
  enabled?: boolean;
}

// Async-context local like grad mode: an autocast forward awaiting data leaves other flows alone. A disabled
// region keeps its dtype: an autocast inside it without one takes it (torch's get_autocast_cpu_dtype)
const autocastState = new AsyncLocalStorage<{ dtype: AutocastDtype; enabled: boolean }>();

/**
 * Runs fn with PyTorch's CPU autocast op list (matmul, linear, conv2d) in `dtype`, like
 * `with torch.autocast('cpu', dtype=...)`. fn may be async. The backends have no 16-bit
 * kernels, so those ops round their inputs and outputs to `dtype` (and, in backward, their
 * incoming and outgoing gradients) and compute in float32 between: the numerics of a 16-bit
 * kernel accumulating in float32, as oneDNN's are, not its speed.
 */
export function autocast<T>(opts: AutocastOptions, fn: () => T): T {
  checkOptions('autocast', opts, ['dtype', 'enabled'], ['enabled']);
  const dtype = opts.dtype ?? autocastState.getStore()?.dtype ?? 'bfloat16';
  if (dtype !== 'bfloat16' && dtype !== 'float16') {
    throw new AutogradArgumentError(`autocast: dtype must be 'bfloat16' or 'float16', got '${String(dtype)}'`);
  }
  return autocastState.run({ dtype, enabled: opts.enabled !== false }, fn);
}

/** The dtype autocast ops run in here, or null outside autocast (torch.is_autocast_enabled). */
export function autocastDtype(): AutocastDtype | null {
  const state = autocastState.getStore();
  return state?.enabled ? state.dtype : null;
}

/**
 * The autocast region here as options that re-enter it: its dtype even when disabled (what an inner
 * autocast without a dtype takes; checkpoint's recomputation restores both, as torch's does).
 */
export function autocastRegion(): Required<AutocastOptions> {
  const state = autocastState.getStore();
  return { dtype: state?.dtype ?? 'bfloat16', enabled: state?.enabled ?? false };
}

/**
 * t's values rounded to the nearest `dtype` value (ties to even; overflow to ±inf), as a new float32
 * tensor: @ddp/tensor's, one native pass where the native kernels run.
 */
export { roundToPrecision };

/** roundToPrecision that passes t through when dtype is null (autocast off). */
export function maybeRound(t: tf.Tensor, dtype: AutocastDtype | null): tf.Tensor {
  return dtype === null ? t : roundToPrecision(t, dtype);
}

/** A tensor that holds `dtype` values: rounded forward, and so is its gradient (a 16-bit tensor's grad is 16-bit). */
class LowerPrecision extends AutogradFunction {
  private dtype: AutocastDtype = 'bfloat16';
  forward(_ctx: Context, x: tf.Tensor, dtype: AutocastDtype): tf.Tensor {
    this.dtype = dtype;
    return roundToPrecision(x, dtype);
  }
  backward(_ctx: Context, dy: tf.Tensor) {
    return [roundToPrecision(dy, this.dtype), null];
  }
}

/** x rounded to the autocast dtype, differentiably; x itself outside autocast. */
export function castToAutocastDtype(x: Tensor): Tensor {
  const dtype = autocastDtype();
  return dtype === null ? x : LowerPrecision.apply(x, dtype);
}

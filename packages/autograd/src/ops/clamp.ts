import { tf } from '@ddp/tensor';
import { AutogradArgumentError } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';

/**
 * torch.clamp: x limited to [min, max] (either may be absent), in x's dtype; NaN stays NaN. The
 * gradient passes where min <= x <= max, bounds included (not at a NaN), as torch's clamp_backward.
 */
class Clamp extends AutogradFunction {
  private min: number | null = null;
  private max: number | null = null;
  forward(ctx: Context, input: tf.Tensor, min: number | null, max: number | null): tf.Tensor {
    [this.min, this.max] = [min, max];
    // an int32 tensor with a fractional bound promotes, as torch's result_type (1.5 was truncated to 1)
    const fractional = [min, max].some((v) => v !== null && !Number.isInteger(v));
    const x = input.dtype === 'int32' && fractional ? tf.cast(input, 'float32') : input;
    let y = x;
    if (min !== null) y = tf.maximum(y, tf.scalar(min, x.dtype));
    if (max !== null) y = tf.minimum(y, tf.scalar(max, x.dtype));
    if (x.dtype !== 'float32') return y === x ? tf.clone(x) : y;
    ctx.saveForBackward(x);
    return tf.where(tf.isNaN(x), x, y); // NaN stays NaN whatever the kernel's maximum makes of it
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [x] = ctx.savedTensors as [tf.Tensor];
    // a NaN is outside (its comparisons are false): gradient 0 there, as torch's clamp_backward
    const inside = [
      this.min === null ? null : tf.greaterEqual(x, this.min),
      this.max === null ? null : tf.lessEqual(x, this.max),
    ].filter((t): t is tf.Tensor => t !== null);
    const pass = inside.length === 2 ? tf.logicalAnd(inside[0], inside[1]) : inside[0];
    return [tf.where(pass, dy, tf.zerosLike(dy)), null, null];
  }
}

/** x limited to [min, max] (torch.clamp / clip); `undefined` or `null` leaves that side open. */
export function clamp(x: Tensor, min?: number | null, max?: number | null): Tensor {
  const [lo, hi] = [min ?? null, max ?? null];
  for (const [name, v] of [
    ['min', lo],
    ['max', hi],
  ] as const) {
    if (v !== null && typeof v !== 'number')
      throw new AutogradArgumentError(`clamp: ${name} must be a number, got ${typeof v} ${String(v)}`);
  }
  if (lo === null && hi === null) throw new AutogradArgumentError('clamp: at least one of min or max must be given');
  if (x.dtype === 'bool') throw new AutogradArgumentError('clamp: not defined for a bool tensor (as in torch)');
  return Clamp.apply(x, lo, hi);
}

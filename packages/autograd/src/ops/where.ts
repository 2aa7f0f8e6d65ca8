import { tf } from '@ddp/tensor';
import { AutogradArgumentError } from '../errors.js';
import { AutogradFunction } from '../function.js';
import { checkInt32Values } from '../int32-range.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';
import { broadcastShapes, broadcastTo, sumToShape } from './broadcast.js';
import { asDtype, promotedKeepingBool } from './promotion.js';

/** cond ? a : b with all three broadcast, in the operands' promoted dtype; the gradient goes to the side taken. */
class Where extends AutogradFunction {
  private aShape: number[] = [];
  private bShape: number[] = [];
  forward(ctx: Context, cond: tf.Tensor, a: tf.Tensor | number, b: tf.Tensor | number): tf.Tensor {
    // torch's promotion: tf.where read an int32 operand's bits as float32 (int 5 became 7e-45)
    const dtype = promotedKeepingBool([a, b]); // bool where bool (was int32)
    // selected as int32 and cast back: tfjs-wasm's Select of bools took b everywhere
    const [ta, tb] = [asDtype(a, dtype === 'bool' ? 'int32' : dtype), asDtype(b, dtype === 'bool' ? 'int32' : dtype)];
    this.aShape = ta.shape;
    this.bShape = tb.shape;
    // typed, as every other op's (tfjs's plain Error for shapes that do not broadcast; probe CZ)
    const shape = [ta.shape, tb.shape].reduce((s, t) => broadcastShapes('where', s, t), cond.shape);
    const c = broadcastTo(tf.cast(cond, 'bool'), shape);
    ctx.saveForBackward(c);
    const selected = tf.where(c, broadcastTo(ta, shape), broadcastTo(tb, shape));
    return dtype === 'bool' ? tf.cast(selected, 'bool') : selected;
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [c] = ctx.savedTensors as [tf.Tensor];
    const zero = tf.zerosLike(dy);
    return [
      null,
      ctx.needsInputGrad[1] ? sumToShape(tf.where(c, dy, zero), this.aShape) : null,
      ctx.needsInputGrad[2] ? sumToShape(tf.where(c, zero, dy), this.bShape) : null,
    ];
  }
}

/**
 * A condition or mask must be bool, as torch's: a float one was cast, so 0.5 or -1e-9 (a mask computed in
 * float) selected; torch 1.13's own masked_fill ignores a float 0/1 mask (x unchanged), so it is refused here.
 */
function requireBool(op: string, mask: Tensor | tf.Tensor): void {
  if (mask.dtype === 'bool') return;
  throw new AutogradArgumentError(
    `${op}: the mask must be a bool tensor, got ${mask.dtype} (compare it, e.g. x.gt(0))`,
  );
}

/** torch.masked_fill also takes integers 0 and 1 as a mask, and refuses other values (an int32 2 selected). */
function requireZeroOne(mask: Tensor | tf.Tensor): void {
  const bad = (mask.dataSync() as Int32Array).find((v) => v !== 0 && v !== 1);
  if (bad !== undefined)
    throw new AutogradArgumentError(`maskedFill: an int32 mask can take 0 and 1 values only, got ${bad}`);
}

/** cond ? a : b elementwise, all three broadcast (torch.where). */
export function where(cond: Tensor | tf.Tensor, a: Tensor | number, b: Tensor | number): Tensor {
  requireBool('where', cond);
  return Where.apply(cond, a, b);
}

/**
 * x with `value` where mask is true (torch.masked_fill): the result keeps x's dtype, the value taken
 * in it; an int32 tensor refuses a value int32 cannot hold, as torch (3e9 wrapped to -1294967296).
 */
export function maskedFill(x: Tensor, mask: Tensor | tf.Tensor, value: number): Tensor {
  if (mask.dtype === 'int32') requireZeroOne(mask);
  else requireBool('maskedFill', mask);
  if (x.dtype === 'float32') return Where.apply(mask, value, x);
  if (x.dtype === 'bool') {
    const fill = tf.scalar(value !== 0, 'bool');
    try {
      return Where.apply(mask, fill, x);
    } finally {
      fill.dispose();
    }
  }
  checkInt32Values('maskedFill', value);
  return Where.apply(mask, Math.trunc(value), x);
}

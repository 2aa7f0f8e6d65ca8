import { tf } from '@ddp/tensor';
import { Function } from '../function.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';
import { sumToShape } from './broadcast.js';

/** An operand: a Tensor or a plain number (a constant). */
export type Operand = Tensor | number;
type Raw = tf.Tensor | number;

const asTensor = (x: Raw): tf.Tensor => (typeof x === 'number' ? tf.scalar(x) : x);
const shapeOf = (x: Raw): number[] => (typeof x === 'number' ? [] : x.shape);

/** Binary elementwise op with broadcasting; subclasses give the kernel and the two partials. */
abstract class Binary extends Function {
  protected aShape: number[] = [];
  protected bShape: number[] = [];

  abstract kernel(a: Raw, b: Raw): tf.Tensor;

  forward(ctx: Context, a: Raw, b: Raw): tf.Tensor {
    this.aShape = shapeOf(a);
    this.bShape = shapeOf(b);
    const y = this.kernel(a, b);
    this.save(ctx, a, b, y);
    return y;
  }

  protected save(_ctx: Context, _a: Raw, _b: Raw, _y: tf.Tensor): void {}
}

class Add extends Binary {
  kernel(a: Raw, b: Raw): tf.Tensor {
    return tf.add(a, b);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    return [ctx.needsInputGrad[0] ? sumToShape(dy, this.aShape) : null, ctx.needsInputGrad[1] ? sumToShape(dy, this.bShape) : null];
  }
}

class Sub extends Binary {
  kernel(a: Raw, b: Raw): tf.Tensor {
    return tf.sub(a, b);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    return [ctx.needsInputGrad[0] ? sumToShape(dy, this.aShape) : null, ctx.needsInputGrad[1] ? sumToShape(tf.neg(dy), this.bShape) : null];
  }
}

class Mul extends Binary {
  kernel(a: Raw, b: Raw): tf.Tensor {
    return tf.mul(a, b);
  }
  protected override save(ctx: Context, a: Raw, b: Raw): void {
    ctx.saveForBackward(asTensor(a), asTensor(b));
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [a, b] = ctx.savedTensors as [tf.Tensor, tf.Tensor];
    return [
      ctx.needsInputGrad[0] ? sumToShape(tf.mul(dy, b), this.aShape) : null,
      ctx.needsInputGrad[1] ? sumToShape(tf.mul(dy, a), this.bShape) : null,
    ];
  }
}

class Div extends Binary {
  kernel(a: Raw, b: Raw): tf.Tensor {
    return tf.div(a, b);
  }
  protected override save(ctx: Context, a: Raw, b: Raw): void {
    ctx.saveForBackward(asTensor(a), asTensor(b));
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [a, b] = ctx.savedTensors as [tf.Tensor, tf.Tensor];
    return [
      ctx.needsInputGrad[0] ? sumToShape(tf.div(dy, b), this.aShape) : null,
      ctx.needsInputGrad[1] ? sumToShape(tf.neg(tf.div(tf.mul(dy, a), tf.square(b))), this.bShape) : null,
    ];
  }
}

class Pow extends Binary {
  kernel(a: Raw, b: Raw): tf.Tensor {
    return tf.pow(a, b);
  }
  protected override save(ctx: Context, a: Raw, b: Raw, y: tf.Tensor): void {
    ctx.saveForBackward(asTensor(a), asTensor(b), y);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [a, b, y] = ctx.savedTensors as [tf.Tensor, tf.Tensor, tf.Tensor];
    return [
      ctx.needsInputGrad[0] ? sumToShape(tf.mul(dy, tf.mul(b, tf.pow(a, tf.sub(b, 1)))), this.aShape) : null,
      ctx.needsInputGrad[1] ? sumToShape(tf.mul(dy, tf.mul(y, tf.log(a))), this.bShape) : null,
    ];
  }
}

/** a + b with broadcasting. */
export const add = (a: Operand, b: Operand): Tensor => Add.apply(a, b);
/** a - b with broadcasting. */
export const sub = (a: Operand, b: Operand): Tensor => Sub.apply(a, b);
/** a * b elementwise with broadcasting. */
export const mul = (a: Operand, b: Operand): Tensor => Mul.apply(a, b);
/** a / b elementwise with broadcasting. */
export const div = (a: Operand, b: Operand): Tensor => Div.apply(a, b);
/** a ** b elementwise with broadcasting (the gradient w.r.t. b needs a > 0). */
export const pow = (a: Operand, b: Operand): Tensor => Pow.apply(a, b);

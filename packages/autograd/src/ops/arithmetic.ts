import { tf } from '@ddp/tensor';
import { AutogradArgumentError } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';
import { broadcastShapes, sumToShape } from './broadcast.js';
import { allFloat, asDtype, promotedDtype } from './promotion.js';

/** An operand: a Tensor or a plain number (a constant). */
export type Operand = Tensor | number;
type Raw = tf.Tensor | number;
/** The gradient w.r.t. one operand before reduction to its shape, given dy, a, b and y. */
type Partial = (dy: tf.Tensor, a: tf.Tensor, b: tf.Tensor, y: tf.Tensor) => tf.Tensor;

const asTensor = (x: Raw): tf.Tensor => (typeof x === 'number' ? tf.scalar(x) : x);

/**
 * torch's ops on two bool tensors: + is or, * is and (bool results), - is refused. Other ops
 * (and bool with a number) promote to int32. null: not two bools or another op.
 */
function bothBool(name: string, a: Raw, b: Raw): tf.Tensor | null {
  if (typeof a === 'number' || typeof b === 'number' || a.dtype !== 'bool' || b.dtype !== 'bool') return null;
  if (name === 'Sub') throw new AutogradArgumentError('sub: subtracting two bool tensors is not supported (as torch)');
  return name === 'Add' ? tf.logicalOr(a, b) : name === 'Mul' ? tf.logicalAnd(a, b) : null;
}

/** torch refuses an integer to a negative integer power (tfjs gave 0 for 2 ** -1, 1 for 1 ** -1). */
function checkIntegerPower(exponent: tf.Tensor): void {
  if (exponent.dataSync().some((e) => e < 0))
    throw new AutogradArgumentError('pow: integers to negative integer powers are not allowed (as torch)');
}

/**
 * A binary elementwise op with broadcasting: y = kernel(a, b), and da, db from the partials,
 * summed back to each operand's shape. `saves` lists what backward reads (nothing else is kept).
 */
function binary(
  name: string,
  kernel: (a: Raw, b: Raw) => tf.Tensor,
  da: Partial,
  db: Partial,
  saves: 'none' | 'ab' | 'aby',
) {
  class Binary extends AutogradFunction {
    private shapes: [number[], number[]] = [[], []];
    forward(ctx: Context, a: Raw, b: Raw): tf.Tensor {
      this.shapes = [asTensor(a).shape, asTensor(b).shape];
      broadcastShapes(name.toLowerCase(), ...this.shapes);
      if (!allFloat([a, b])) {
        const logical = bothBool(name, a, b);
        if (logical) return logical;
        // integer or bool operands: torch's promotion, not tfjs's (see promotion.ts)
        const dtype = promotedDtype([a, b], name === 'Div');
        [a, b] = [asDtype(a, dtype), asDtype(b, dtype)];
        if (name === 'Pow' && dtype === 'int32') checkIntegerPower(b);
      }
      const y = kernel(a, b);
      if (saves !== 'none') ctx.saveForBackward(asTensor(a), asTensor(b));
      if (saves === 'aby') ctx.saveForBackward(y);
      return y;
    }
    backward(ctx: Context, dy: tf.Tensor) {
      const [a, b, y] = saves === 'none' ? [dy, dy, dy] : (ctx.savedTensors as [tf.Tensor, tf.Tensor, tf.Tensor]);
      // an empty output: each gradient is a sum over no term, 0 (pow's tf.where(…, 0, …) gave [1, 1, 1] for [1, 0, 1])
      const grad = (i: 0 | 1, partial: Partial) =>
        dy.size === 0 ? tf.zeros(this.shapes[i], dy.dtype) : sumToShape(partial(dy, a, b, y), this.shapes[i]);
      return [ctx.needsInputGrad[0] ? grad(0, da) : null, ctx.needsInputGrad[1] ? grad(1, db) : null];
    }
  }
  Object.defineProperty(Binary, 'name', { value: name });
  return (a: Operand, b: Operand): Tensor => Binary.apply(a, b);
}

/** a + b with broadcasting. */
export const add = binary(
  'Add',
  tf.add,
  (dy) => dy,
  (dy) => dy,
  'none',
);
/** a - b with broadcasting. */
export const sub = binary(
  'Sub',
  tf.sub,
  (dy) => dy,
  (dy) => tf.neg(dy),
  'none',
);
/** a * b elementwise with broadcasting. */
export const mul = binary(
  'Mul',
  tf.mul,
  (dy, _a, b) => tf.mul(dy, b),
  (dy, a) => tf.mul(dy, a),
  'ab',
);
/**
 * a / b elementwise with broadcasting. b's gradient as torch's −dy·((a/b)/b): through b² it
 * overflowed above |b| ≈ 1.8e19 (−0 for a = b = 1e20, torch −1e-20) and underflowed below ~1e-19.5
 * (probe DC).
 */
export const div = binary(
  'Div',
  tf.div,
  (dy, _a, b) => tf.div(dy, b),
  (dy, a, b) => tf.neg(tf.mul(dy, tf.div(tf.div(a, b), b))),
  'ab',
);
/**
 * tf.pow, with C's pow(±1, ±inf) = pow(1, NaN) = 1 (torch's) on tfjs's cpu backend, whose Math.pow gives NaN
 * there (probe BV); the wasm kernel is C's already.
 */
function powAsC(a: Raw, b: Raw): tf.Tensor {
  if (tf.getBackend() !== 'cpu') return tf.pow(a, b);
  return tf.tidy(() => {
    const y = tf.pow(a, b);
    if (y.dtype !== 'float32') return y;
    const [base, exponent] = [a, b].map((v) => (typeof v === 'number' ? tf.scalar(v) : v));
    const nonFinite = tf.logicalOr(tf.isInf(exponent), tf.logicalAnd(tf.isNaN(exponent), tf.equal(base, 1)));
    return tf.where(tf.logicalAnd(tf.equal(tf.abs(base), 1), nonFinite), 1, y);
  });
}

/**
 * a ** b elementwise with broadcasting. As torch: where b is 0 the gradient w.r.t. a is 0 (not
 * 0·a⁻¹, NaN at a = 0), and where a is 0 and b ≥ 0 the one w.r.t. b is 0 (not 0·log 0, NaN).
 */
export const pow = binary(
  'Pow',
  powAsC,
  (dy, a, b) => tf.where(tf.equal(b, 0), 0, tf.mul(dy, tf.mul(b, tf.pow(a, tf.sub(b, 1))))),
  (dy, a, b, y) => tf.where(tf.logicalAnd(tf.equal(a, 0), tf.greaterEqual(b, 0)), 0, tf.mul(dy, tf.mul(y, tf.log(a)))),
  'aby',
);

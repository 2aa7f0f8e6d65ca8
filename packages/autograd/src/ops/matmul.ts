import { tf } from '@ddp/tensor';
import { type AutocastDtype, autocastDtype, castToAutocastDtype, maybeRound } from '../autocast.js';
import { AutogradArgumentError, checkOptions } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import { tidy } from '../scope.js';
import type { Tensor } from '../tensor.js';
import { add } from './arithmetic.js';
import { broadcastShapes, broadcastTo, reshapeTo, sumToShape } from './broadcast.js';
import { requireFloat32 } from './promotion.js';

const sameShape = (a: readonly number[], b: readonly number[]) =>
  a.length === b.length && a.every((d, i) => d === b[i]);

/** t as [rows, last dim], its leading dims folded into the rows; counted, not -1: tfjs cannot infer -1 beside a 0. */
const asRows = (t: tf.Tensor) => tf.reshape(t, [tf.util.sizeFromShape(t.shape.slice(0, -1)), t.shape[t.rank - 1]]);

/**
 * tf.matMul with batch broadcasting done explicitly: tfjs 4.22 mis-broadcasts batch dims of
 * size 1 on both cpu and wasm. A rank-2 right operand folds the left's batch into its rows.
 */
function bmm(a: tf.Tensor, b: tf.Tensor, transA: boolean, transB: boolean): tf.Tensor {
  const batchA = a.shape.slice(0, -2);
  const batchB = b.shape.slice(0, -2);
  if (sameShape(batchA, batchB)) return tf.matMul(a, b, transA, transB);
  if (b.rank === 2 && !transA) {
    const y = tf.matMul(asRows(a), b, false, transB);
    return tf.reshape(y, [...batchA, a.shape[a.rank - 2], y.shape[1]!]);
  }
  const batch = tf.broadcast_util.assertAndGetBroadcastShape(batchA, batchB);
  const full = (t: tf.Tensor) => broadcastTo(t, [...batch, ...t.shape.slice(-2)]);
  return tf.matMul(full(a), full(b), transA, transB);
}

/** Batched matrix product with optional transposes; batch dimensions broadcast. */
class MatMul extends AutogradFunction {
  private transA = false;
  private transB = false;
  private lower: AutocastDtype | null = null;

  forward(ctx: Context, a: tf.Tensor, b: tf.Tensor, transA: boolean, transB: boolean, roundOutput = true): tf.Tensor {
    if (a.rank < 2 || b.rank < 2) {
      throw new AutogradArgumentError(`matmul needs operands of rank >= 2, got [${a.shape}] and [${b.shape}]`);
    }
    const inner = (s: number[], last: boolean) => s[s.length - (last ? 1 : 2)];
    const [ka, kb] = [inner(a.shape, !transA), inner(b.shape, transB)];
    if (ka !== kb) {
      const t = `${transA ? ', a transposed' : ''}${transB ? ', b transposed' : ''}`;
      throw new AutogradArgumentError(
        `matmul: inner dimensions of [${a.shape}] and [${b.shape}] differ (${ka} vs ${kb}${t})`,
      );
    }
    if (!(b.rank === 2 && !transA))
      broadcastShapes(
        `matmul of [${a.shape}] and [${b.shape}], batch dims`,
        a.shape.slice(0, -2),
        b.shape.slice(0, -2),
      );
    this.transA = transA;
    this.transB = transB;
    this.lower = autocastDtype();
    [a, b] = [maybeRound(a, this.lower), maybeRound(b, this.lower)];
    ctx.saveForBackward(a, b);
    const y = bmm(a, b, transA, transB);
    return roundOutput ? maybeRound(y, this.lower) : y;
  }

  backward(ctx: Context, dyIn: tf.Tensor) {
    const [a, b] = ctx.savedTensors as [tf.Tensor, tf.Tensor];
    const { transA, transB, lower } = this;
    const dy = maybeRound(dyIn, lower);
    let da: tf.Tensor | null = null;
    let db: tf.Tensor | null = null;
    if (ctx.needsInputGrad[0]) {
      // C = op(A) op(B): dA follows from dC op(B)^T, transposed back when A was
      da = transA ? bmm(b, dy, transB, true) : bmm(dy, b, false, !transB);
      da = sumToShape(da, a.shape);
    }
    if (ctx.needsInputGrad[1] && b.rank === 2 && a.rank > 2 && !transA) {
      // a shared weight under a batched input: fold the batch into the rows, one matmul
      db = transB ? tf.matMul(asRows(dy), asRows(a), true, false) : tf.matMul(asRows(a), asRows(dy), true, false);
    } else if (ctx.needsInputGrad[1]) {
      db = transB ? bmm(dy, a, true, transA) : bmm(a, dy, !transA, false);
      db = sumToShape(db, b.shape);
    }
    return [da && maybeRound(da, lower), db && maybeRound(db, lower), null, null, null];
  }
}

/** Matrix product of the last two dims, batch dims broadcast (torch.matmul for rank >= 2). */
export function matmul(a: Tensor, b: Tensor, opts: { transposeA?: boolean; transposeB?: boolean } = {}): Tensor {
  checkOptions('matmul', opts, ['transposeA', 'transposeB'], ['transposeA', 'transposeB']);
  requireFloat32('matmul', a, b);
  return MatMul.apply(a, b, opts.transposeA ?? false, opts.transposeB ?? false, true);
}

/**
 * F.linear as one node: x [..., in] flattened to rows, one product with W [out, in]
 * transposed, the bias added; backward is two products and a column sum. Saves x and W.
 */
class Linear extends AutogradFunction {
  /** Rows of x once flattened: the product of its leading dims. */
  private rows = 1;
  forward(ctx: Context, x: tf.Tensor, w: tf.Tensor, b: tf.Tensor | null): tf.Tensor {
    const inF = x.shape[x.rank - 1];
    if (w.rank !== 2 || x.rank < 1 || w.shape[1] !== inF || (b && (b.rank !== 1 || b.shape[0] !== w.shape[0]))) {
      throw new AutogradArgumentError(
        `linear: input [${x.shape}], weight [${w.shape}] and bias [${b?.shape ?? ''}] do not fit (weight ` +
          `[out, in], bias [out])`,
      );
    }
    ctx.saveForBackward(x, w);
    this.rows = x.shape.slice(0, -1).reduce((n, d) => n * d, 1);
    const rows = tf.matMul(reshapeTo(x, [this.rows, inF]), w, false, true);
    return reshapeTo(b ? tf.add(rows, b) : rows, [...x.shape.slice(0, -1), w.shape[0]]);
  }

  backward(ctx: Context, dy: tf.Tensor) {
    const [x, w] = ctx.savedTensors as [tf.Tensor, tf.Tensor];
    const [outF, inF] = w.shape as [number, number];
    const dyRows = reshapeTo(dy, [this.rows, outF]);
    const dx = ctx.needsInputGrad[0] ? reshapeTo(tf.matMul(dyRows, w), x.shape) : null;
    const dw = ctx.needsInputGrad[1] ? tf.matMul(dyRows, reshapeTo(x, [this.rows, inF]), true, false) : null;
    const db = ctx.needsInputGrad[2] ? tf.sum(dyRows, 0) : null;
    return [dx, dw, db];
  }
}

/**
 * F.linear: x W^T + b, with W [out, in] as in PyTorch: one node outside autocast; under autocast
 * the rounded product, the bias rounded too, and x W^T + b rounded once.
 */
export function linear(x: Tensor, weight: Tensor, bias: Tensor | null = null): Tensor {
  requireFloat32('linear', x, weight, ...(bias ? [bias] : []));
  if (autocastDtype() === null) return Linear.apply(x, weight, bias);
  return tidy(() => {
    // one sample [in] as one row, as outside autocast (MatMul takes rank ≥ 2; it raised here; probe AM)
    const rows = x.rank === 1 ? x.reshape([1, -1]) : x;
    const y = bias
      ? castToAutocastDtype(add(MatMul.apply<Tensor>(rows, weight, false, true, false), castToAutocastDtype(bias)))
      : matmul(rows, weight, { transposeB: true });
    return x.rank === 1 ? y.reshape([-1]) : y;
  });
}

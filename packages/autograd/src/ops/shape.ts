import { tf } from '@ddp/tensor';
import { AutogradArgumentError } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';
import { broadcastTo, normaliseAxes, normaliseDim, sumToShape } from './broadcast.js';

/** A reshape target must hold as many elements as the input (one -1 dim is inferred). */
function checkReshape(from: readonly number[], to: readonly number[]): void {
  const size = from.reduce((n, d) => n * d, 1);
  const fail = (why: string) =>
    new AutogradArgumentError(`reshape: cannot reshape [${from}] (${size} elements) to [${to}]: ${why}`);
  const inferred = to.filter((d) => d === -1).length;
  if (inferred > 1) throw fail('only one dim can be -1');
  if (to.some((d) => d !== -1 && !(Number.isInteger(d) && d >= 0)))
    throw fail('dims must be non-negative integers or -1');
  const known = to.reduce((n, d) => (d === -1 ? n : n * d), 1);
  if (inferred === 1 && known === 0) throw fail('the -1 dim could be any size (the other dims hold no element)');
  if (inferred === 0 ? known !== size : known === 0 ? size !== 0 : size % known !== 0) throw fail('sizes differ');
}

class Reshape extends AutogradFunction {
  private inShape: number[] = [];
  forward(_ctx: Context, x: tf.Tensor, shape: number[]): tf.Tensor {
    this.inShape = x.shape;
    checkReshape(x.shape, shape);
    return tf.reshape(x, shape);
  }
  backward(_ctx: Context, dy: tf.Tensor) {
    return [tf.reshape(dy, this.inShape), null];
  }
}

class Permute extends AutogradFunction {
  private perm: number[] = [];
  forward(_ctx: Context, x: tf.Tensor, perm: number[]): tf.Tensor {
    this.perm = perm.map((d) => (d < 0 ? d + x.rank : d));
    if (
      this.perm.length !== x.rank ||
      new Set(this.perm).size !== x.rank ||
      this.perm.some((d) => !(Number.isInteger(d) && d >= 0 && d < x.rank))
    ) {
      throw new AutogradArgumentError(`permute: [${perm}] is not a permutation of ${x.rank} dims`);
    }
    return tf.transpose(x, this.perm);
  }
  backward(_ctx: Context, dy: tf.Tensor) {
    const inverse = Array<number>(this.perm.length);
    for (const [i, p] of this.perm.entries()) inverse[p] = i;
    return [tf.transpose(dy, inverse), null];
  }
}

/** View with a new shape (one entry may be -1). */
export const reshape = (x: Tensor, shape: number[]): Tensor => Reshape.apply(x, sizesArray('reshape', shape));
/** Reorders dims: output dim i is input dim dims[i] (torch.permute). */
export const permute = (x: Tensor, dims: number[]): Tensor => Permute.apply(x, sizesArray('permute', dims));

/** The function forms take one array (torch.reshape(x, (4, 3))); a number there was an untyped crash. */
function sizesArray(where: string, given: unknown): number[] {
  if (!Array.isArray(given))
    throw new AutogradArgumentError(`${where}: expected an array of sizes, got ${String(given)}`);
  return given;
}

/** Swaps two dims (torch.transpose); negative dims count from the end. */
export function transpose(x: Tensor, dim0 = -2, dim1 = -1): Tensor {
  const r = x.rank;
  const perm = [...Array(r).keys()];
  const a = normaliseDim(dim0, r, 'transpose');
  const b = normaliseDim(dim1, r, 'transpose');
  [perm[a], perm[b]] = [perm[b], perm[a]];
  return permute(x, perm);
}

/** Inserts a size-1 dim at `dim`. */
export function unsqueeze(x: Tensor, dim: number): Tensor {
  const shape = [...x.shape];
  // the new dim may also go after the last: [-(rank + 1), rank]
  if (!(Number.isInteger(dim) && dim >= -(x.rank + 1) && dim <= x.rank)) {
    throw new AutogradArgumentError(
      `unsqueeze: dim ${dim} is out of range [${-(x.rank + 1)}, ${x.rank}] for [${x.shape}]`,
    );
  }
  shape.splice(dim < 0 ? dim + x.rank + 1 : dim, 0, 1);
  return reshape(x, shape);
}

/** Removes size-1 dims (all of them, or the given one). */
export function squeeze(x: Tensor, dim?: number): Tensor {
  const d = dim === undefined ? undefined : normaliseDim(dim, x.rank, 'squeeze');
  return reshape(
    x,
    x.shape.filter((s, i) => s !== 1 || (d !== undefined && i !== d)),
  );
}

/**
 * `along(x, dim)` over one dim of x; a 0-d x taken as a 1-element vector and given back 0-d:
 * torch takes dim 0 or -1 of a scalar, tfjs reduces no axis of one.
 */
export function alongDim(x: Tensor, dim: number, op: string, along: (x: Tensor, dim: number) => Tensor): Tensor {
  const d = normaliseDim(dim, x.rank, op);
  return x.rank > 0 ? along(x, d) : reshape(along(reshape(x, [1]), 0), []);
}

/** Collapses dims startDim..endDim into one (torch.flatten). */
export function flatten(x: Tensor, startDim = 0, endDim = -1): Tensor {
  // a 0-d x takes the dims of a 1-d one, as torch's (Flatten()'s startDim 1 on a scalar raised there; probe CY)
  const [s, e] = [startDim, endDim].map((d) => normaliseAxes(d, Math.max(x.rank, 1), 'flatten')[0]);
  if (x.rank === 0) return reshape(x, [1]);
  if (s > e)
    throw new AutogradArgumentError(`flatten: startDim ${startDim} comes after endDim ${endDim} of [${x.shape}]`);
  const shape = x.shape;
  const merged = shape.slice(s, e + 1).reduce((n, d) => n * d, 1);
  return reshape(x, [...shape.slice(0, s), merged, ...shape.slice(e + 1)]);
}

class Pad extends AutogradFunction {
  private paddings: [number, number][] = [];
  forward(_ctx: Context, x: tf.Tensor, paddings: [number, number][], value: number): tf.Tensor {
    this.paddings = paddings;
    // a 0-d x has no dim to pad (torch's F.pad(x, []) is x); tf.pad refuses a scalar
    return x.rank === 0 ? tf.clone(x) : tf.pad(x, paddings, value);
  }
  backward(_ctx: Context, dy: tf.Tensor) {
    if (dy.rank === 0) return [dy, null, null];
    const begin = this.paddings.map(([b]) => b);
    const size = dy.shape.map((d, i) => d - this.paddings[i][0] - this.paddings[i][1]);
    return [tf.slice(dy, begin, size), null, null];
  }
}

/** Constant padding, one [before, after] pair per dim. */
export function pad(x: Tensor, paddings: [number, number][], value = 0): Tensor {
  // torch crops on a negative pad; tfjs-wasm read out of bounds (an untyped RuntimeError)
  if (paddings.flat().some((p) => !(Number.isInteger(p) && p >= 0)))
    throw new AutogradArgumentError(`pad: paddings must be non-negative integers, got ${JSON.stringify(paddings)}`);
  // tf.pad took a shorter list as a tensor of that rank: a 1-D result of meaningless values
  if (paddings.length !== x.rank || paddings.some((p) => p.length !== 2)) {
    throw new AutogradArgumentError(
      `pad: one [before, after] pair per dim of [${x.shape}], got ${JSON.stringify(paddings)}`,
    );
  }
  return Pad.apply(x, paddings, value);
}

class Expand extends AutogradFunction {
  private inShape: number[] = [];
  forward(_ctx: Context, x: tf.Tensor, shape: number[]): tf.Tensor {
    this.inShape = x.shape;
    return broadcastTo(x, shape);
  }
  backward(_ctx: Context, dy: tf.Tensor) {
    return [sumToShape(dy, this.inShape), null];
  }
}

/**
 * x repeated along its size-1 dims (and new leading ones) to `sizes` (torch.expand; -1 keeps a dim).
 * A copy here (tfjs has no strided views); the gradient sums back, as torch's.
 */
export function expand(x: Tensor, sizes: number[]): Tensor {
  const lead = sizesArray('expand', sizes).length - x.rank;
  const fail = (why: string) => new AutogradArgumentError(`expand: [${x.shape}] to [${sizes}]: ${why}`);
  if (lead < 0) throw fail('fewer sizes than dims');
  const shape = sizes.map((d, i) => {
    const own = i < lead ? null : x.shape[i - lead];
    if (d === -1) {
      if (own === null) throw fail(`-1 for the new leading dim ${i}`);
      return own;
    }
    if (!(Number.isInteger(d) && d >= 0)) throw fail(`size ${d} is not a non-negative integer`);
    if (own !== null && own !== 1 && own !== d) throw fail(`dim ${i} is ${own}, which only expands from 1`);
    return d;
  });
  return Expand.apply(x, shape);
}

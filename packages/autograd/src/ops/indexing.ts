import { tf } from '@ddp/tensor';
import { AutogradArgumentError, checkOptions } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import { tidy } from '../scope.js';
import type { Tensor } from '../tensor.js';
import { normaliseAxes, normaliseDim } from './broadcast.js';
import { type Indices, toIndexTensor } from './index-tensor.js';
import { asDtype, promotedKeepingBool } from './promotion.js';
import { alongDim, unsqueeze } from './shape.js';

/** tf.gather, also for an empty input (tfjs gave [1, 0, 2, 1] for x [0, 3] and indices [0, 2] on dim 1). */
export function gather(x: tf.Tensor, idx: tf.Tensor, axis: number): tf.Tensor {
  if (x.size > 0) return tf.gather(x, idx, axis);
  return tf.zeros([...x.shape.slice(0, axis), ...idx.shape, ...x.shape.slice(axis + 1)], x.dtype);
}

/** Refuses an index outside [0, size): a gather there reads another row or fails untyped. */
function checkInRange(idx: tf.Tensor, size: number, op: string): void {
  for (const v of idx.dataSync()) {
    if (v < 0 || v >= size) throw new AutogradArgumentError(`${op}: index ${v} is out of range for ${size} rows`);
  }
}

/**
 * Row scatter-add: out[ids[i]] += values[i] for values [n, ...] and out [rows, ...], except row
 * `skipRow` (embedding's padding row), which stays 0. Done on the host: tfjs's cpu
 * UnsortedSegmentSum (also what wasm runs) loops over every segment, which made the embedding
 * gradient the slowest op of a training step.
 */
function scatterAddRows(values: tf.Tensor, ids: tf.Tensor, rows: number, skipRow = -1): tf.Tensor {
  const n = values.shape[0];
  const width = values.shape.slice(1).reduce((a, b) => a * b, 1);
  const src = values.dataSync() as Float32Array;
  const index = ids.dataSync();
  const out = new Float32Array(rows * width);
  for (let i = 0; i < n; i++) {
    const row = index[i];
    if (row === skipRow) continue;
    for (let j = 0, o = row * width, v = i * width; j < width; j++) out[o + j] += src[v + j];
  }
  return tf.tensor(out, [rows, ...values.shape.slice(1)]);
}

class Concat extends AutogradFunction {
  private sizes: number[] = [];
  private dim = 0;
  forward(_ctx: Context, dim: number, ...xs: tf.Tensor[]): tf.Tensor {
    this.dim = dim;
    this.sizes = xs.map((x) => x.shape[this.dim]);
    // torch's: tf.concat kept the first one's (int [3, 4] and [0.5]: [3, 4, 0]); bools stay bool
    const dtype = promotedKeepingBool(xs);
    const inputs = xs.map((x) => asDtype(x, dtype));
    return tf.concat(inputs, this.dim);
  }
  backward(_ctx: Context, dy: tf.Tensor) {
    return [null, ...tf.split(dy, this.sizes, this.dim)];
  }
}

class Split extends AutogradFunction {
  private dim = 0;
  forward(_ctx: Context, x: tf.Tensor, sizes: number[], dim: number): tf.Tensor[] {
    this.dim = dim;
    return tf.split(x, sizes, this.dim);
  }
  backward(_ctx: Context, ...dys: tf.Tensor[]) {
    return [tf.concat(dys, this.dim), null, null];
  }
}

class Slice extends AutogradFunction {
  private inShape: number[] = [];
  private begin: number[] = [];
  forward(_ctx: Context, x: tf.Tensor, begin: number[], size: number[]): tf.Tensor {
    this.inShape = x.shape;
    this.begin = begin;
    // a 0-d x is its own only block (torch's x[()]); tf.slice refuses a scalar
    return x.rank === 0 ? tf.clone(x) : tf.slice(x, begin, size);
  }
  backward(_ctx: Context, dy: tf.Tensor) {
    if (dy.rank === 0) return [dy, null, null];
    const padding = this.inShape.map(
      (d, i) => [this.begin[i] ?? 0, d - (this.begin[i] ?? 0) - dy.shape[i]] as [number, number],
    );
    return [tf.pad(dy, padding), null, null];
  }
}

class IndexSelect extends AutogradFunction {
  private inShape: number[] = [];
  private dim = 0;
  forward(ctx: Context, x: tf.Tensor, dim: number, idx: tf.Tensor): tf.Tensor {
    this.inShape = x.shape;
    this.dim = dim;
    ctx.saveForBackward(idx);
    return gather(x, idx, this.dim);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [idx] = ctx.savedTensors as [tf.Tensor];
    const perm = [this.dim, ...[...Array(dy.rank).keys()].filter((d) => d !== this.dim)];
    const inverse = perm.map((_, i) => perm.indexOf(i));
    const summed = scatterAddRows(tf.transpose(dy, perm), idx, this.inShape[this.dim]);
    return [tf.transpose(summed, inverse), null, null];
  }
}

class Embedding extends AutogradFunction {
  private rows = 0;
  private paddingRow = -1;
  forward(ctx: Context, table: tf.Tensor, idx: tf.Tensor, paddingRow: number): tf.Tensor {
    this.rows = table.shape[0];
    this.paddingRow = paddingRow;
    const flat = tf.reshape(idx, [-1]);
    ctx.saveForBackward(flat);
    return tf.reshape(tf.gather(table, flat, 0), [...idx.shape, table.shape[1]!]);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [flat] = ctx.savedTensors as [tf.Tensor];
    // [n, width], not [n, -1]: with no ids, -1 cannot be inferred
    const rows = tf.reshape(dy, [flat.size, dy.shape[dy.rank - 1]]);
    return [scatterAddRows(rows, flat, this.rows, this.paddingRow), null, null];
  }
}

/** Concatenates along dim (torch.cat). */
export function concat(xs: Tensor[], dim = 0): Tensor {
  if (xs.length === 0) throw new AutogradArgumentError('concat needs at least one tensor');
  const [first] = xs;
  if (first.rank === 0) throw new AutogradArgumentError('concat: a 0-d tensor cannot be concatenated (stack it)');
  const d = normaliseDim(dim, first.rank, 'concat');
  // checked here: tfjs's own errors were untyped, and named neither the tensor nor the dim
  for (const [i, x] of xs.entries()) {
    if (x.rank !== first.rank || x.shape.some((n, j) => j !== d && n !== first.shape[j])) {
      throw new AutogradArgumentError(
        `concat: tensor ${i} is [${x.shape}] and tensor 0 [${first.shape}]: sizes must match except in dim ${d}`,
      );
    }
  }
  return Concat.apply(d, ...xs);
}
export { concat as cat };

/** Joins tensors of one shape along a new dim (torch.stack); dim may also be rank (after the last). */
export function stack(xs: Tensor[], dim = 0): Tensor {
  if (xs.length === 0) throw new AutogradArgumentError('stack needs at least one tensor');
  const bad = xs.findIndex((x) => x.shape.length !== xs[0].rank || x.shape.some((d, i) => d !== xs[0].shape[i]));
  if (bad >= 0)
    throw new AutogradArgumentError(
      `stack: tensor ${bad} is [${xs[bad].shape}] and tensor 0 [${xs[0].shape}]: they must match`,
    );
  // the unsqueezed views freed here (they shared their inputs' storage beyond the inputs' dispose)
  return tidy(() =>
    concat(
      xs.map((x) => unsqueeze(x, dim)),
      dim < 0 ? dim + xs[0].rank + 1 : dim,
    ),
  );
}

/** Pieces of `size` covering `length`, the last the rest (one empty piece when length is 0). */
function pieces(length: number, size: number): number[] {
  if (size === 0) return [0];
  return Array.from({ length: Math.max(1, Math.ceil(length / size)) }, (_, i) => Math.min(size, length - i * size));
}

/**
 * The sizes torch.chunk cuts a dim of `length` into: ⌈length / chunks⌉ each, the last the rest,
 * so fewer than `chunks` when they run out (10 into 3: 4, 4, 2; 9 into 4: 3, 3, 3); of an
 * empty dim, `chunks` empty pieces.
 */
export function chunkSizes(length: number, chunks: number): number[] {
  if (!(Number.isInteger(chunks) && chunks > 0))
    throw new AutogradArgumentError(`chunk: chunks must be a positive integer, got ${chunks}`);
  return length === 0 ? Array(chunks).fill(0) : pieces(length, Math.ceil(length / chunks));
}

/** The dim split or chunk cut along; a scalar has none (torch refuses it too). */
function splitDim(x: Tensor, dim: number, op: string): number {
  if (x.rank === 0) throw new AutogradArgumentError(`${op}: a scalar (0-d tensor) has no dim to cut`);
  return normaliseAxes(dim, x.rank, op)[0];
}

/**
 * torch.split: pieces of `splitSize` along dim (the last the rest), or of the given sizes,
 * which must add up to the dim. A number is a piece's size as in torch, not tf.split's count:
 * qkv.split(d, -1) of a [.., 3d] tensor is q, k, v. For a count of pieces use chunk.
 */
export function split(x: Tensor, splitSizeOrSizes: number | number[], dim = 0): Tensor[] {
  const d = splitDim(x, dim, 'split');
  const length = x.shape[d];
  const given = splitSizeOrSizes;
  if (typeof given === 'number' && !(Number.isInteger(given) && given >= 0 && (given > 0 || length === 0)))
    throw new AutogradArgumentError(`split: the split size must be a positive integer, got ${given} for [${x.shape}]`);
  const sizes = typeof given === 'number' ? pieces(length, given) : given;
  if (sizes.reduce((a, b) => a + b, 0) !== length || sizes.some((n) => !(Number.isInteger(n) && n >= 0)))
    throw new AutogradArgumentError(`split: sizes [${sizes}] do not add up to dim ${d} of [${x.shape}]`);
  if (sizes.length === 0) return []; // an empty dim split into no pieces, as torch's (a TypeError; probe CZ)
  return Split.apply<Tensor[]>(x, sizes, d);
}

/** torch.chunk: `chunks` pieces along dim, ⌈length / chunks⌉ each (fewer when they run out). */
export const chunk = (x: Tensor, chunks: number, dim = 0): Tensor[] =>
  split(x, chunkSizes(x.shape[splitDim(x, dim, 'chunk')], chunks), dim);

/**
 * The block starting at `begin` with `size` (-1 = to the end) per dim (tf.slice). A block
 * reaching outside x is refused: tf.slice returned it, filled with whatever memory was there.
 */
export function slice(x: Tensor, begin: number[], size: number[]): Tensor {
  // tf.slice took entries beyond x's rank as more dims, filled from whatever memory was there
  if (begin.length > x.rank || size.length > x.rank) {
    throw new AutogradArgumentError(`slice: begin [${begin}] and size [${size}] have more dims than [${x.shape}]`);
  }
  x.shape.forEach((d, i) => {
    const [b, n] = [begin[i] ?? 0, size[i] ?? -1];
    if (!(Number.isInteger(b) && Number.isInteger(n) && b >= 0 && b <= d && (n === -1 || (n >= 0 && b + n <= d)))) {
      throw new AutogradArgumentError(`slice: begin ${b}, size ${n} along dim ${i} is outside [${x.shape}]`);
    }
  });
  return Slice.apply(x, begin, size);
}

/** `length` entries from `start` along dim (torch.narrow; a negative start counts from the end). */
export function narrow(x: Tensor, dim: number, start: number, length: number): Tensor {
  const d = normaliseDim(dim, x.rank, 'narrow');
  if (start < 0) start += x.shape[d];
  if (!(length >= 0 && start >= 0 && start + length <= x.shape[d])) {
    throw new AutogradArgumentError(`narrow: start ${start} + length ${length} exceeds dim ${d} of [${x.shape}]`);
  }
  return slice(
    x,
    x.shape.map((_, i) => (i === d ? start : 0)),
    x.shape.map((s, i) => (i === d ? length : s)),
  );
}

/** Picks entries along dim by integer index (torch.index_select); repeated indices accumulate grads. */
export function indexSelect(x: Tensor, dim: number, indices: Indices): Tensor {
  const idx = toIndexTensor(indices, 'indexSelect');
  try {
    const d = normaliseDim(dim, x.rank, 'indexSelect');
    // torch's index is a vector; a matrix gathered like x[idx] but its gradient came back misshapen
    if (idx.rank > 1) throw new AutogradArgumentError(`indexSelect: the index must be 1-D, got [${idx.shape}]`);
    // a 0-d x is a vector of one, as torch's
    checkInRange(idx, x.rank > 0 ? x.shape[d] : 1, 'indexSelect');
    if (x.rank === 0 && idx.size !== 1)
      throw new AutogradArgumentError(`indexSelect: a 0-d tensor takes one index, got ${idx.size}`);
    return alongDim(x, d, 'indexSelect', (t, along) => IndexSelect.apply(t, along, idx));
  } finally {
    idx.dispose();
  }
}

/**
 * The row a padding index names in a table of `rows` rows: negative counts from the end, as
 * torch's padding_idx; outside [-rows, rows) or fractional is refused.
 */
function paddingRow(paddingIdx: number, rows: number, op: string): number {
  if (!(Number.isInteger(paddingIdx) && paddingIdx >= -rows && paddingIdx < rows)) {
    throw new AutogradArgumentError(`${op}: paddingIdx ${paddingIdx} must be an integer in [-${rows}, ${rows})`);
  }
  return paddingIdx < 0 ? paddingIdx + rows : paddingIdx;
}

/**
 * Table rows for integer ids of any shape: output shape [...ids.shape, dim] (F.embedding). The
 * row `paddingIdx` names gets no gradient, as torch's padding_idx (its value is still returned).
 */
export function embedding(ids: Indices, table: Tensor, opts: { paddingIdx?: number } = {}): Tensor {
  checkOptions('embedding', opts, ['paddingIdx']);
  if (table.rank !== 2)
    throw new AutogradArgumentError(`embedding: the table must be [rows, dim], got [${table.shape}]`);
  const skip = opts.paddingIdx === undefined ? -1 : paddingRow(opts.paddingIdx, table.shape[0], 'embedding');
  const idx = toIndexTensor(ids, 'embedding');
  try {
    checkInRange(idx, table.shape[0], 'embedding');
    return Embedding.apply(table, idx, skip);
  } finally {
    idx.dispose();
  }
}

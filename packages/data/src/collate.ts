import { checkOptionValue, tf } from '@ddp/tensor';
import { CollateError, checkDataOptions, dataArgumentError } from './errors.js';

/** Typed arrays a sample may hold (Uint8Array images included). */
export type SampleArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Int16Array
  | Int32Array
  | Uint8Array
  | Uint8ClampedArray
  | Uint16Array
  | Uint32Array;

/** A typed array with a shape: how a sample says "this is a 28×28 image", not a flat vector. */
export interface NDArray<A extends SampleArray = SampleArray> {
  data: A;
  shape: readonly number[];
}

/** What defaultCollate makes of a batch of samples of type T. */
export type Collated<T> = T extends number | boolean
  ? tf.Tensor1D
  : T extends SampleArray
    ? tf.Tensor2D
    : T extends NDArray | tf.Tensor
      ? tf.Tensor
      : T extends string
        ? string[]
        : T extends object
          ? { [K in keyof T]: Collated<T[K]> }
          : never;

export interface CollateOptions {
  /**
   * dtype of plain numbers. 'auto' (default): int32 when every number in the batch is an
   * integer (labels, like PyTorch's int64 for Python ints), else float32. Force 'float32'
   * for float targets that may happen to be whole numbers.
   */
  numberDtype?: 'auto' | 'float32' | 'int32';
}

/** An object literal (or Object.create(null)): a Date, Map or class instance has no fields to collate (was {}). */
export function isPlainObject(x: unknown): x is Record<string, unknown> {
  if (typeof x !== 'object' || x === null) return false;
  const proto = Object.getPrototypeOf(x);
  return proto === Object.prototype || proto === null;
}

function isNDArray(x: unknown): x is NDArray {
  if (typeof x !== 'object' || x === null) return false;
  const r = x as Partial<NDArray>;
  return ArrayBuffer.isView(r.data) && Array.isArray(r.shape);
}

function dtypeOf(a: SampleArray): 'float32' | 'int32' {
  return a instanceof Float32Array || a instanceof Float64Array ? 'float32' : 'int32';
}

/** The typed arrays a tensor can be made of: not BigInt64Array (tfjs has no int64) nor a DataView. */
const SAMPLE_ARRAYS = [
  Float32Array,
  Float64Array,
  Int8Array,
  Int16Array,
  Int32Array,
  Uint8Array,
  Uint8ClampedArray,
  Uint16Array,
  Uint32Array,
];

/** Stacks equally shaped typed arrays into one tensor of shape [B, ...shape]. */
function stackArrays(arrays: NDArray[], path: string): tf.Tensor {
  const { shape } = arrays[0];
  if (!shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw new CollateError(`${path}: sample 0 has shape [${shape}]; a shape holds non-negative integers`);
  }
  const unsupported = arrays.findIndex((a) => !SAMPLE_ARRAYS.some((type) => a.data instanceof type));
  if (unsupported >= 0) {
    throw new CollateError(
      `${path}: sample ${unsupported} is a ${arrays[unsupported].data.constructor.name}, which no tensor dtype holds ` +
        '(int64 is not one); convert it to an Int32Array or a Float64Array first',
    );
  }
  const dtype = dtypeOf(arrays[0].data);
  const size = shape.reduce((a, b) => a * b, 1);
  const out = dtype === 'float32' ? new Float32Array(arrays.length * size) : new Int32Array(arrays.length * size);
  arrays.forEach((a, i) => {
    if (a.data.length !== size || a.shape.length !== shape.length || a.shape.some((d, k) => d !== shape[k])) {
      throw new CollateError(
        `${path}: sample ${i} has shape [${a.shape}] (${a.data.length} values), sample 0 has [${shape}]`,
      );
    }
    if (dtypeOf(a.data) !== dtype) {
      throw new CollateError(
        `${path}: sample ${i} is a ${a.data.constructor.name}, sample 0 a ${arrays[0].data.constructor.name}`,
      );
    }
    if (a.data instanceof Uint32Array && a.data.some((v) => v > 0x7fffffff)) {
      throw new CollateError(`${path}: sample ${i} holds uint32 values above int32's range`);
    }
    if (a.data instanceof Float64Array) checkFloat32(a.data, () => `${path}: sample ${i} holds`);
    out.set(a.data, i * size);
  });
  return tf.tensor(out, [arrays.length, ...shape], dtype);
}

/** int32 keeps only what it can hold: others would wrap (3e9 → -1294967296) or truncate (2.5 → 2) silently. */
function checkInt32(nums: number[], path: string): void {
  const i = nums.findIndex((v) => !Number.isInteger(v) || v < -0x80000000 || v > 0x7fffffff);
  if (i >= 0) {
    throw new CollateError(
      `${path}: sample ${i} is ${nums[i]}, which int32 cannot hold (an integer in [-2^31, 2^31 - 1]); ` +
        `collate with numberDtype 'float32' or map the values first`,
    );
  }
}

/** float32 overflows a finite float64 beyond ±3.4e38 to ±Infinity, silently: refused as int32's wrap is. */
function checkFloat32(values: ArrayLike<number>, subject: (index: number) => string): void {
  const i = Array.from(values).findIndex((v) => Number.isFinite(v) && !Number.isFinite(Math.fround(v)));
  if (i >= 0) {
    throw new CollateError(
      `${subject(i)} ${values[i]}, which float32 cannot hold (it would be ±Infinity); scale the values first`,
    );
  }
}

function collateField(samples: unknown[], path: string, opts: CollateOptions): unknown {
  const first = samples[0];
  const kind = (x: unknown): string =>
    x === null ? 'null' : Array.isArray(x) ? 'array' : ArrayBuffer.isView(x) ? 'typed array' : typeof x;
  samples.forEach((s, i) => {
    if (kind(s) !== kind(first))
      throw new CollateError(`${path}: sample ${i} is a ${kind(s)}, sample 0 a ${kind(first)}`);
  });
  if (typeof first === 'number') {
    const nums = samples as number[];
    const dtype =
      opts.numberDtype && opts.numberDtype !== 'auto'
        ? opts.numberDtype
        : nums.every(Number.isInteger)
          ? 'int32'
          : 'float32';
    if (dtype === 'int32') checkInt32(nums, path);
    else checkFloat32(nums, (i) => `${path}: sample ${i} is`);
    return tf.tensor1d(nums, dtype);
  }
  if (typeof first === 'boolean') return tf.tensor1d(samples as boolean[], 'bool');
  if (typeof first === 'string') return samples.slice();
  if (first instanceof tf.Tensor) {
    const ts = samples as tf.Tensor[];
    ts.forEach((t, i) => {
      if (!(t instanceof tf.Tensor)) throw new CollateError(`${path}: sample ${i} is not a tensor`);
      // a tensor the dataset keeps (torch's TensorDataset) was consumed by the batch before: a TypeError from tfjs
      if (t.isDisposed)
        throw new CollateError(
          `${path}: sample ${i} is a disposed tensor: collate consumes the samples it stacks, so getItem must hand ` +
            'out a new tensor each time (clone one the dataset keeps; ArrayDataset does)',
        );
      if (!tf.util.arraysEqual(t.shape, ts[0].shape) || t.dtype !== ts[0].dtype) {
        throw new CollateError(
          `${path}: sample ${i} is a ${t.dtype} tensor of shape [${t.shape}], ` +
            `sample 0 a ${ts[0].dtype} of [${ts[0].shape}]`,
        );
      }
    });
    return tf.stack(ts);
  }
  if (ArrayBuffer.isView(first)) {
    return stackArrays(
      (samples as SampleArray[]).map((data) => ({ data, shape: [data.length] })),
      path,
    );
  }
  if (isNDArray(first)) {
    samples.forEach((s, i) => {
      if (!isNDArray(s)) throw new CollateError(`${path}: sample ${i} is not an NDArray {data, shape}`);
    });
    return stackArrays(samples as NDArray[], path);
  }
  if (Array.isArray(first)) {
    const tuples = samples as unknown[][];
    tuples.forEach((t, i) => {
      if (t.length !== first.length)
        throw new CollateError(`${path}: sample ${i} has ${t.length} elements, sample 0 has ${first.length}`);
    });
    return first.map((_, k) =>
      collateField(
        tuples.map((t) => t[k]),
        `${path}[${k}]`,
        opts,
      ),
    );
  }
  if (isPlainObject(first)) {
    const keys = Object.keys(first);
    const out: Record<string, unknown> = {};
    for (const key of keys) {
      const values = samples.map((s, i) => {
        if (!(key in (s as object))) throw new CollateError(`${path}: sample ${i} has no key '${key}'`);
        return (s as Record<string, unknown>)[key];
      });
      out[key] = collateField(values, `${path}.${key}`, opts);
    }
    return out;
  }
  const what = typeof first === 'object' && first !== null ? (first.constructor?.name ?? 'object') : kind(first);
  throw new CollateError(
    `${path}: cannot collate a ${what}: ` +
      'samples hold tensors, typed arrays, numbers, booleans, strings, arrays or plain objects',
  );
}

/** Every tf.Tensor inside a sample (they are disposed once stacked into the batch, or dropped). */
export function tensorsIn(x: unknown, out: tf.Tensor[] = [], seen = new Set<object>()): tf.Tensor[] {
  if (x instanceof tf.Tensor) out.push(x);
  // arrays and plain objects only, once each: what collation reads (a class instance, such as a
  // shared tokenizer an item refers to, is not the sample's to dispose), and no cycle loops
  else if ((Array.isArray(x) || isPlainObject(x)) && !seen.has(x)) {
    seen.add(x);
    for (const v of Object.values(x)) tensorsIn(v, out, seen);
  }
  return out;
}

/**
 * Turns a list of samples into a batch, like torch's default_collate: numbers and booleans
 * become 1-D tensors; typed arrays [B, len] tensors (float arrays → float32, integer arrays
 * → int32); NDArrays {data, shape} and tf.Tensors are stacked to [B, ...shape]; strings stay
 * a string[]; arrays (tuples) and objects are collated field by field, keeping their shape.
 * tf.Tensors in the samples are consumed: they are disposed after stacking. On a CollateError
 * nothing is leaked.
 */
export function createCollate(opts: CollateOptions = {}) {
  checkDataOptions('createCollate', opts, ['numberDtype']);
  // 'float64' or 'int64' (torch's names) fell through to 'auto'
  checkOptionValue('createCollate', 'numberDtype', opts.numberDtype, ['auto', 'float32', 'int32'], dataArgumentError);
  return <T>(samples: readonly T[]): Collated<T> => {
    if (samples.length === 0) throw new CollateError('cannot collate an empty batch');
    const inputs = samples.flatMap((s) => tensorsIn(s));
    try {
      // tidy disposes whatever a failed collation had already built.
      return tf.tidy(() => collateField(samples as unknown[], 'batch', opts) as tf.TensorContainer) as Collated<T>;
    } finally {
      tf.dispose(inputs);
    }
  };
}

export const defaultCollate = createCollate();

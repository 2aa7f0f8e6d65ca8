import type { KernelBackend, KernelConfig, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { IndexBoundsError } from './errors.js';
import { wrapKernel } from './kernel-wrap.js';
import { replaceWithCpu, runOnCpuWhen } from './run-on-cpu.js';

/**
 * Raw tfjs ops (the `tf` @ddp/tensor re-exports) given an index outside their input. tfjs-wasm
 * 4.22's kernels check none: a slice past the end read the bytes after the tensor, gatherND read
 * them at any index, scatterND, tensorScatterUpdate and sparseToDense wrote them (then `memory
 * access out of bounds` on a later op), a negative pad crashed where cpu crops, bincount counted
 * a negative value where cpu refuses. Those run on cpu, tfjs's reference, which checks; a slice
 * is checked as cpu checks it and stays on wasm (training slices often). On both backends a
 * permutation with a repeated axis (cpu mixed in zeros, wasm returned x), a cumsum axis outside
 * the rank (ignored; a negative one is counted from the end, as torch counts it) and a crop's box
 * index outside the batch (zeros, NaN, or read past the images) are refused, as torch and
 * TensorFlow refuse them.
 */
const UNCHECKED_ON_WASM = ['GatherNd', 'ScatterNd', 'TensorScatterUpdate', 'SparseToDense', 'Bincount'] as const;

function refuse(op: string, message: string): never {
  throw new IndexBoundsError(`${op}: ${message}`);
}

/** Every axis once (a bit per axis: no allocation, Transpose runs often in training). */
function checkPermutation(x: TensorInfo, perm: number[]): void {
  const rank = x.shape.length;
  let seen = 0;
  for (const p of perm) {
    const axis = p < 0 ? p + rank : p;
    if (!(axis >= 0 && axis < rank) || seen & (1 << axis)) break;
    seen |= 1 << axis;
  }
  if (perm.length !== rank || seen !== 2 ** rank - 1)
    refuse('transpose', `perm [${perm}] is not a permutation of the ${rank} axes of [${x.shape}]`);
}

function checkAxis(op: string, x: TensorInfo, axis: number): void {
  const rank = x.shape.length;
  if (!(Number.isInteger(axis) && axis >= -rank && axis < Math.max(rank, 1)))
    refuse(op, `axis ${axis} is out of range for a tensor of rank ${rank}`);
}

function checkBoxIndices(args: Parameters<KernelConfig['kernelFunc']>[0]): void {
  const { image, boxInd } = args.inputs as { image: TensorInfo; boxInd: TensorInfo };
  const batch = image.shape[0];
  const bad = (args.backend as KernelBackend).readSync(boxInd.dataId) as Int32Array;
  const at = bad.findIndex((b) => !(b >= 0 && b < batch));
  if (at >= 0) refuse('cropAndResize', `box index ${bad[at]} (box ${at}) is not an image of the batch of ${batch}`);
}

export function registerIndexBounds(): void {
  for (const name of UNCHECKED_ON_WASM) replaceWithCpu(name);
  wrapKernel('Slice', 'wasm', (slice) => (args) => {
    const { begin, size } = args.attrs as unknown as tf.SliceAttrs;
    const x = args.inputs.x as TensorInfo;
    const [b, s] = tf.slice_util.parseSliceParams(x as tf.Tensor, begin, size);
    tf.slice_util.assertParamsValid(x, b, s);
    return slice(args);
  });
  runOnCpuWhen('PadV2', (args) =>
    (args.attrs as unknown as tf.PadV2Attrs).paddings.some(([before, after]) => before < 0 || after < 0),
  );
  for (const backend of ['wasm', 'cpu']) {
    wrapKernel('Transpose', backend, (transpose) => (args) => {
      checkPermutation(args.inputs.x as TensorInfo, (args.attrs as unknown as tf.TransposeAttrs).perm);
      return transpose(args);
    });
    for (const name of ['Cumsum', 'Cumprod']) {
      wrapKernel(name, backend, (cumulative) => (args) => {
        const x = args.inputs.x as TensorInfo;
        const attrs = args.attrs as unknown as tf.CumsumAttrs;
        checkAxis(name.toLowerCase(), x, attrs.axis);
        // counted from the end as torch counts it: wasm wrote out of bounds (later ops crashed), cpu gave no values
        if (attrs.axis >= 0) return cumulative(args);
        return cumulative({ ...args, attrs: { ...attrs, axis: attrs.axis + x.shape.length } as never });
      });
    }
    wrapKernel('CropAndResize', backend, (crop) => (args) => {
      checkBoxIndices(args);
      return crop(args);
    });
  }
}

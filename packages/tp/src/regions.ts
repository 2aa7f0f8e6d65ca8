import { AutogradFunction, type Context, type Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { tf } from '@ddp/tensor';
import { TensorParallelError } from './errors.js';

// The four region functions of Megatron-LM / picotron: where activations enter and leave a
// tensor-parallel region, and what their gradients do on the way back.

const hostCopy = async (t: tf.Tensor): Promise<Float32Array> => Float32Array.from((await t.data()) as Float32Array);

async function allReduceSum(t: tf.Tensor, group: ProcessGroup): Promise<tf.Tensor> {
  const buf = await hostCopy(t);
  await group.allReduce(buf).wait();
  return tf.tensor(buf, t.shape);
}

/** Every rank's t concatenated along the last dim (rank order). */
async function allGatherLastDim(t: tf.Tensor, group: ProcessGroup): Promise<tf.Tensor> {
  const out = new Float32Array(t.size * group.size);
  await group.allGatherInto(out, await hostCopy(t)).wait();
  return tf.tidy(() =>
    tf.concat(
      [...Array(group.size).keys()].map((r) => tf.tensor(out.subarray(r * t.size, (r + 1) * t.size), t.shape)),
      -1,
    ),
  );
}

/** This rank's 1/size slice of the last dim. */
function ownSliceLastDim(t: tf.Tensor, group: ProcessGroup): tf.Tensor {
  const last = t.shape[t.rank - 1];
  if (last % group.size !== 0) {
    throw new TensorParallelError(
      `rank ${group.ranks[group.rank]}: last dim ${last} is not divisible by the tp size ${group.size}`,
    );
  }
  const width = last / group.size;
  const begin = t.shape.map((_, i) => (i === t.rank - 1 ? group.rank * width : 0));
  const size = t.shape.map((d, i) => (i === t.rank - 1 ? width : d));
  return tf.slice(t, begin, size);
}

abstract class Region extends AutogradFunction {
  protected group!: ProcessGroup;
}

class CopyToTp extends Region {
  forward(_ctx: Context, x: tf.Tensor, group: ProcessGroup): tf.Tensor {
    this.group = group;
    return x;
  }
  async backward(_ctx: Context, dy: tf.Tensor) {
    return [await allReduceSum(dy, this.group), null];
  }
}

class ReduceFromTp extends Region {
  async forward(_ctx: Context, x: tf.Tensor, group: ProcessGroup): Promise<tf.Tensor> {
    return allReduceSum(x, group);
  }
  backward(_ctx: Context, dy: tf.Tensor) {
    return [tf.clone(dy), null];
  }
}

class GatherFromTp extends Region {
  async forward(_ctx: Context, x: tf.Tensor, group: ProcessGroup): Promise<tf.Tensor> {
    this.group = group;
    return allGatherLastDim(x, group);
  }
  backward(_ctx: Context, dy: tf.Tensor) {
    return [ownSliceLastDim(dy, this.group), null];
  }
}

class SplitToTp extends Region {
  forward(_ctx: Context, x: tf.Tensor, group: ProcessGroup): tf.Tensor {
    this.group = group;
    return ownSliceLastDim(x, group);
  }
  async backward(_ctx: Context, dy: tf.Tensor) {
    return [await allGatherLastDim(dy, this.group), null];
  }
}

/** Identity forward; backward all-reduces the gradient (the input of a column-parallel layer). */
export function copyToTp(x: Tensor, group: ProcessGroup): Tensor {
  return group.size === 1 ? x : CopyToTp.apply(x, group);
}

/** All-reduce (sum) forward; identity backward (the output of a row-parallel layer). */
export async function reduceFromTp(x: Tensor, group: ProcessGroup): Promise<Tensor> {
  return group.size === 1 ? x : ReduceFromTp.applyAsync(x, group);
}

/** All-gather along the last dim forward; backward keeps this rank's slice of the gradient. */
export async function gatherFromTp(x: Tensor, group: ProcessGroup): Promise<Tensor> {
  return group.size === 1 ? x : GatherFromTp.applyAsync(x, group);
}

/** This rank's slice of the last dim forward; backward all-gathers the gradient. */
export function splitToTp(x: Tensor, group: ProcessGroup): Tensor {
  return group.size === 1 ? x : SplitToTp.apply(x, group);
}

import { bfloatToFloat, floatToBfloat, floatToHalf, type HalfDtype, halfToFloat, ReduceOp } from '@ddp/comm';
import { copyTensorInto, tensorFromFloat32, tf } from '@ddp/tensor';
import { BufferPool } from '@ddp/zero';
import type { FlatShard } from './flat-shard.js';
import { allSettled } from './heap-collectives.js';

/**
 * FlatShard's collectives through host memory, for when its heap path cannot run (2-byte values
 * on the wire, one rank, no shared wasm heap): the same regions (parameter i's N chunks of c_i
 * elements at N·start_i), in pooled host buffers, one collective per region.
 */
type Layout = Pick<FlatShard, 'group' | 'chunks' | 'starts' | 'shapes' | 'shardSize' | 'shards'>;

/** The host path's buffers, shared by every unit (see @ddp/zero's BufferPool). */
export const hostBuffers = new BufferPool(2);

/** All-gathers the shards; resolves with each full parameter as a new tensor of its shape. Collective. */
export async function gatherOnHost(layout: Layout, half: HalfDtype | undefined): Promise<tf.Tensor[]> {
  const { group, shardSize, shapes } = layout;
  const local = hostBuffers.take(shardSize);
  const full = hostBuffers.take(shardSize * group.size);
  const { chunk, region } = spans(layout);
  try {
    for (const [i, s] of layout.shards.entries()) copyTensorInto(s.data, local, layout.starts[i]);
    if (half) {
      const [out, narrowed] = [new Uint16Array(full.length), narrow(local, half)];
      await perRegion(layout, (i) =>
        group.allGatherInto(out.subarray(...region(i)), narrowed.subarray(...chunk(i)), { dtype: half }).wait(),
      );
      widen(out, half, full);
    } else {
      await perRegion(layout, (i) =>
        group.allGatherInto(full.subarray(...region(i)), local.subarray(...chunk(i))).wait(),
      );
    }
    return shapes.map((shape, i) => {
      const at = region(i)[0];
      return tensorFromFloat32(full.subarray(at, at + sizeOf(shape)), shape);
    });
  } finally {
    hostBuffers.give(local);
    hostBuffers.give(full);
  }
}

/**
 * Reduce-scatters the full gradients (null: zeros), each divided by N in the backend first (FSDP's
 * pre-divide: a sum of x / N cannot overflow, and 2-byte values cannot carry AVG's fallback); resolves
 * with this rank's chunk of each. Collective.
 */
export async function reduceScatterOnHost(
  layout: Layout,
  grads: readonly (tf.Tensor | null)[],
  dtype: HalfDtype | undefined,
): Promise<tf.Tensor[]> {
  const { group, shardSize, shapes, chunks, starts } = layout;
  const n = group.size;
  const flat = hostBuffers.take(shardSize * n);
  const mine = hostBuffers.take(shardSize);
  const { chunk, region } = spans(layout);
  try {
    grads.forEach((grad, i) => {
      const [at, end] = region(i);
      const size = sizeOf(shapes[i]);
      if (grad !== null) {
        const divided = n === 1 ? grad : tf.mul(grad, 1 / n);
        copyTensorInto(divided, flat, at);
        if (divided !== grad) divided.dispose();
      } else flat.fill(0, at, at + size);
      flat.fill(0, at + size, end); // the padding: a reused buffer holds another unit's values there
    });
    if (dtype) {
      const [out, narrowed] = [new Uint16Array(shardSize), narrow(flat, dtype)];
      await perRegion(layout, (i) =>
        group
          .reduceScatter(out.subarray(...chunk(i)), narrowed.subarray(...region(i)), { op: ReduceOp.SUM, dtype })
          .wait(),
      );
      widen(out, dtype, mine);
    } else {
      await perRegion(layout, (i) =>
        group.reduceScatter(mine.subarray(...chunk(i)), flat.subarray(...region(i)), { op: ReduceOp.SUM }).wait(),
      );
    }
    return chunks.map((c, i) => tensorFromFloat32(mine.subarray(starts[i], starts[i] + c), [c]));
  } finally {
    hostBuffers.give(flat);
    hostBuffers.give(mine);
  }
}

/** Parameter i's chunk among this rank's (back to back) and its region of the gathered buffer. */
function spans({ group, chunks, starts }: Layout) {
  return {
    chunk: (i: number) => [starts[i], starts[i] + chunks[i]] as const,
    region: (i: number) => [group.size * starts[i], group.size * (starts[i] + chunks[i])] as const,
  };
}

/** One collective per parameter's region, all in flight. */
const perRegion = ({ chunks }: Layout, op: (i: number) => Promise<void>) => allSettled(chunks.map((_, i) => op(i)));

const sizeOf = (shape: number[]) => shape.reduce((a, b) => a * b, 1);

function narrow(src: Float32Array, dtype: HalfDtype): Uint16Array {
  const to = dtype === 'float16' ? floatToHalf : floatToBfloat;
  return Uint16Array.from(src, to);
}

function widen(src: Uint16Array, dtype: HalfDtype, dst: Float32Array): void {
  const from = dtype === 'float16' ? halfToFloat : bfloatToFloat;
  for (let i = 0; i < src.length; i++) dst[i] = from(src[i]);
}

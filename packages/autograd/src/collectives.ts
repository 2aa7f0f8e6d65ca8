import type { ProcessGroup } from '@ddp/comm';
import { checkOptionValue, tf } from '@ddp/tensor';
import { AutogradArgumentError, argumentError, checkOptions } from './errors.js';
import { AutogradFunction } from './function.js';
import type { Context } from './node.js';
import type { Tensor } from './tensor.js';

/** The reductions that have a gradient: sum, and avg (sum / world size). */
const DIFF_REDUCE_OPS = ['sum', 'avg'] as const;
export type DiffReduceOp = (typeof DIFF_REDUCE_OPS)[number];

// Collectives move float32 host copies; a fresh copy, since backends may hand out their own storage.
const hostCopy = async (t: tf.Tensor): Promise<Float32Array> => Float32Array.from((await t.data()) as Float32Array);

async function allReduceTensor(t: tf.Tensor, group: ProcessGroup, op: DiffReduceOp): Promise<tf.Tensor> {
  const buf = await hostCopy(t);
  await group.allReduce(buf, { op }).wait();
  return tf.tensor(buf, t.shape);
}

/** A collective Function: remembers its group (and reduction) for the async backward. */
abstract class Collective extends AutogradFunction {
  protected group!: ProcessGroup;
  protected op: DiffReduceOp = 'sum';
  protected setup(x: tf.Tensor, name: string, group: ProcessGroup, op: DiffReduceOp = 'sum'): void {
    if (x.dtype !== 'float32') {
      throw new AutogradArgumentError(`rank ${group.ranks[group.rank]}: ${name} moves float32 tensors, got ${x.dtype}`);
    }
    this.group = group;
    this.op = op;
  }
}

/** y = sum (or mean) over ranks of x; dx = the same reduction of dy over ranks. */
class AllReduce extends Collective {
  async forward(_ctx: Context, x: tf.Tensor, group: ProcessGroup, op: DiffReduceOp): Promise<tf.Tensor> {
    this.setup(x, 'allReduce', group, op);
    return allReduceTensor(x, group, op);
  }
  async backward(_ctx: Context, dy: tf.Tensor) {
    return [await allReduceTensor(dy, this.group, this.op), null, null];
  }
}

/** One output per rank (equal shapes); dx = sum over ranks of their gradient for this rank's piece. */
class AllGather extends Collective {
  async forward(_ctx: Context, x: tf.Tensor, group: ProcessGroup): Promise<tf.Tensor[]> {
    this.setup(x, 'allGather', group);
    const out = new Float32Array(x.size * group.size);
    await group.allGatherInto(out, await hostCopy(x)).wait();
    return [...Array(group.size).keys()].map((r) => tf.tensor(out.subarray(r * x.size, (r + 1) * x.size), x.shape));
  }
  async backward(_ctx: Context, ...dys: tf.Tensor[]) {
    const n = dys[0].size;
    const input = new Float32Array(n * dys.length);
    for (const [r, dy] of dys.entries()) input.set((await dy.data()) as Float32Array, r * n);
    const out = new Float32Array(n);
    await this.group.reduceScatter(out, input, { op: 'sum' }).wait();
    return [tf.tensor(out, dys[0].shape), null];
  }
}

/** x's dim-0 splits into size chunks; rank r gets the reduction of chunk r; dx = all-gather of dy. */
class ReduceScatter extends Collective {
  async forward(_ctx: Context, x: tf.Tensor, group: ProcessGroup, op: DiffReduceOp): Promise<tf.Tensor> {
    this.setup(x, 'reduceScatter', group, op);
    if (x.rank === 0 || x.shape[0] % group.size !== 0) {
      throw new AutogradArgumentError(
        `rank ${group.ranks[group.rank]}: reduceScatter needs dim 0 (${x.shape[0]}) divisible by the ` +
          `group size ${group.size}`,
      );
    }
    const out = new Float32Array(x.size / group.size);
    await group.reduceScatter(out, await hostCopy(x), { op }).wait();
    return tf.tensor(out, [x.shape[0] / group.size, ...x.shape.slice(1)]);
  }
  async backward(_ctx: Context, dy: tf.Tensor) {
    const out = new Float32Array(dy.size * this.group.size);
    await this.group.allGatherInto(out, await hostCopy(dy)).wait();
    const dx = tf.tensor(out, [dy.shape[0] * this.group.size, ...dy.shape.slice(1)]);
    return [
      this.op === 'avg'
        ? tf.tidy(() => {
            const s = tf.div(dx, this.group.size);
            dx.dispose();
            return s;
          })
        : dx,
      null,
      null,
    ];
  }
}

/** y = src's x on every rank; src receives the sum of every rank's dy, the others zero. */
class Broadcast extends Collective {
  private src = 0;
  async forward(_ctx: Context, x: tf.Tensor, group: ProcessGroup, src: number): Promise<tf.Tensor> {
    this.setup(x, 'broadcast', group);
    this.src = src;
    const buf = await hostCopy(x);
    await group.broadcast(buf, { src }).wait();
    return tf.tensor(buf, x.shape);
  }
  async backward(_ctx: Context, dy: tf.Tensor) {
    const buf = await hostCopy(dy);
    await this.group.reduce(buf, { dst: this.src, op: 'sum' }).wait();
    return [this.group.rank === this.src ? tf.tensor(buf, dy.shape) : tf.zerosLike(dy), null, null];
  }
}

function reduceOp(where: string, opts: { op?: DiffReduceOp }): DiffReduceOp {
  checkOptions(where, opts, ['op']);
  // 'max' reached the all-reduce, and backward treated it as a sum: a wrong gradient
  checkOptionValue(where, 'op', opts.op, DIFF_REDUCE_OPS, argumentError);
  return opts.op ?? 'sum';
}

/** Differentiable all-reduce (torch.distributed.nn.functional.all_reduce); op 'sum' or 'avg'. */
export const allReduce = (x: Tensor, group: ProcessGroup, opts: { op?: DiffReduceOp } = {}): Promise<Tensor> =>
  AllReduce.applyAsync(x, group, reduceOp('allReduce', opts));

/** Differentiable all-gather: one Tensor per rank, in group-rank order (equal shapes). */
export const allGather = (x: Tensor, group: ProcessGroup): Promise<Tensor[]> =>
  AllGather.applyAsync<Tensor[]>(x, group);

/** Differentiable reduce-scatter over dim 0 (which must divide by the group size). */
export const reduceScatter = (x: Tensor, group: ProcessGroup, opts: { op?: DiffReduceOp } = {}): Promise<Tensor> =>
  ReduceScatter.applyAsync(x, group, reduceOp('reduceScatter', opts));

/** Differentiable broadcast from group rank src. */
export const broadcast = (x: Tensor, group: ProcessGroup, opts: { src: number }): Promise<Tensor> =>
  Broadcast.applyAsync(x, group, opts.src);

import { AutogradFunction, type Context, type Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { tf } from '@ddp/tensor';
import { ContrastiveError } from './errors.js';

/** What a gather along dim 0 hands back: the rows of every rank, and how many came from each. */
export interface GatheredRows {
  /** [sum of rowsPerRank, ...x.shape.slice(1)], rank 0's rows first. */
  gathered: Tensor;
  rowsPerRank: number[];
  /** Rows on lower ranks: where this rank's rows start in `gathered`. */
  offset: number;
}

const globalRank = (group: ProcessGroup) => group.ranks[group.rank] ?? group.rank;

/** The shared forward: all-gather of dim-0 slices whose row counts may differ. */
abstract class GatherRows extends AutogradFunction {
  protected group!: ProcessGroup;
  protected rows: number[] = [];
  protected rowLen = 1;

  async forward(_ctx: Context, x: tf.Tensor, group: ProcessGroup, sizesOut: number[]): Promise<tf.Tensor> {
    if (x.dtype !== 'float32' || x.rank === 0) {
      throw new ContrastiveError(
        `needs a float32 tensor with a batch dim, got ${x.dtype} of shape [${x.shape}]`,
        globalRank(group),
        'allGatherWithGrad',
      );
    }
    this.group = group;
    const rowShape = x.shape.slice(1);
    this.rowLen = rowShape.reduce((a, b) => a * b, 1);
    // each piece starts with its row shape (as floats: exact below 2^24), so every rank sees the same
    // misfit: rows of [4] beside rows of [2] were read at this rank's width, a wrong batch on each rank
    const header = [rowShape.length, ...rowShape];
    const mine = new Float32Array(header.length + x.size);
    mine.set(header);
    mine.set(x.dataSync(), header.length);
    const pieces = (await group.allGather(mine).wait()) as Float32Array[];
    const shapes = pieces.map((p) => [...p.subarray(1, 1 + p[0])]);
    const other = shapes.findIndex((sh) => sh.join() !== shapes[0].join());
    if (other >= 0) {
      throw new ContrastiveError(
        `ranks hold rows of different shapes: rank ${group.ranks[0]}'s are [${shapes[0]}], ` +
          `rank ${group.ranks[other]}'s [${shapes[other]}]`,
        globalRank(group),
        'allGatherWithGrad',
      );
    }
    this.rows = pieces.map((p) => (p.length - header.length) / this.rowLen);
    sizesOut.push(...this.rows);
    const total = this.rows.reduce((a, b) => a + b, 0);
    const out = new Float32Array(total * this.rowLen);
    let at = 0;
    for (const p of pieces) {
      out.set(p.subarray(header.length), at);
      at += p.length - header.length;
    }
    return tf.tensor(out, [total, ...rowShape]);
  }

  /** dy's rows that belong to this rank. */
  protected ownRows(dy: Float32Array): Float32Array {
    const start = this.rows.slice(0, this.group.rank).reduce((a, b) => a + b, 0) * this.rowLen;
    return dy.slice(start, start + this.rows[this.group.rank] * this.rowLen);
  }
}

/**
 * Backward: a reduce-scatter, so each rank receives the sum over ranks of the gradient for its
 * own rows. Row counts may differ, while the comm reduce-scatter takes equal chunks: every
 * rank's slice is zero-padded to the largest row count, and the padding dropped after.
 */
class AllGatherWithGrad extends GatherRows {
  async backward(_ctx: Context, dy: tf.Tensor) {
    const { group, rows, rowLen } = this;
    const flat = (await dy.data()) as Float32Array;
    const chunk = Math.max(...rows) * rowLen;
    const input = new Float32Array(chunk * group.size);
    let at = 0;
    rows.forEach((n, r) => {
      input.set(flat.subarray(at, at + n * rowLen), r * chunk);
      at += n * rowLen;
    });
    const out = new Float32Array(chunk);
    await group.reduceScatter(out, input, { op: 'sum' }).wait();
    const mine = rows[group.rank];
    return [tf.tensor(out.subarray(0, mine * rowLen), [mine, ...dy.shape.slice(1)]), null, null];
  }
}

/** The naive gather, kept to teach: backward hands back only this rank's slice of its own gradient. */
class AllGatherLocalGrad extends GatherRows {
  backward(_ctx: Context, dy: tf.Tensor) {
    const mine = this.rows[this.group.rank];
    return [tf.tensor(this.ownRows(dy.dataSync() as Float32Array), [mine, ...dy.shape.slice(1)]), null, null];
  }
}

async function gatherWith(
  fn: typeof AllGatherWithGrad | typeof AllGatherLocalGrad,
  x: Tensor,
  group: ProcessGroup,
): Promise<GatheredRows> {
  const rowsPerRank: number[] = [];
  const gathered = await fn.applyAsync<Tensor>(x, group, rowsPerRank);
  return { gathered, rowsPerRank, offset: rowsPerRank.slice(0, group.rank).reduce((a, b) => a + b, 0) };
}

/** allGatherWithGrad, also telling how many rows each rank sent and where this rank's start. */
export const allGatherRows = (x: Tensor, group: ProcessGroup): Promise<GatheredRows> =>
  gatherWith(AllGatherWithGrad, x, group);

/**
 * Concatenates every rank's x along dim 0 (row counts may differ); the backward gives each rank
 * the sum over ranks of the gradient for its own rows, so a [local × global] loss summed over
 * ranks has exactly the single-process gradient.
 */
export const allGatherWithGrad = async (x: Tensor, group: ProcessGroup): Promise<Tensor> =>
  (await allGatherRows(x, group)).gathered;

/**
 * The bug this package exists to prevent: a gather whose backward keeps only this rank's part
 * of its own loss's gradient (what copying the local tensor into a plain all_gather's output
 * gives). The other ranks' losses never reach this rank's inputs.
 */
export const allGatherLocalGrad = (x: Tensor, group: ProcessGroup): Promise<GatheredRows> =>
  gatherWith(AllGatherLocalGrad, x, group);

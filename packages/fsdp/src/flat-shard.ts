import type { SavedTensorHooks, Tensor } from '@ddp/autograd';
import {
  bfloatToFloat,
  floatToBfloat,
  floatToHalf,
  type HalfDtype,
  halfToFloat,
  type ProcessGroup,
  ReduceOp,
} from '@ddp/comm';
import { type Module, markGradientShard, Parameter } from '@ddp/nn';
import { copyTensorInto, storageViews, tensorFromFloat32, tf } from '@ddp/tensor';
import { BufferPool } from '@ddp/zero';
import { gatherIntoTensor, reduceScatterTensor } from './heap-collectives.js';

/** Why a full parameter has no data: its unit is resharded. */
const RESHARDED =
  "fsdp: this parameter is resharded (a unit's parameters exist only inside its forward and backward); " +
  'step the optimizer over FSDPModule.parameters(), the shards';

/**
 * One unit's parameters as a flat, padded buffer cut into N equal shards (FSDP's FlatParameter):
 * rank r holds elements [r·s, (r+1)·s) as the Parameter `shard`, the last shard zero-padded when
 * the total does not divide by N. `gather` all-gathers the shards into the full parameters'
 * data; `free` drops it again; `reduceScatterGrads` averages the full gradients across the
 * ranks and returns this rank's slice, the shard's gradient.
 */
export class FlatShard {
  readonly shapes: number[][];
  readonly offsets: number[];
  readonly total: number;
  /** Elements per shard, padding included. */
  readonly shardSize: number;
  readonly shard: Parameter;
  private gathered = true;
  private pending: Promise<void> | null = null;

  /**
   * For the unit's recorded forward: a Function saving one of the gathered parameters (or a
   * reshape of it, which shares its storage) keeps which parameter it was, not its storage, so
   * `free` releases the memory; backward reads the parameter gathered again. Anything else
   * (activations, a slice or a transpose of a parameter) is saved as usual.
   */
  readonly savedParameterHooks: SavedTensorHooks<{ index: number; shape: number[] }> = {
    pack: (t) => {
      const index = this.params.findIndex((p) => !p.isDisposed && p.data.dataId === t.dataId);
      return index < 0 ? undefined : { index, shape: [...t.shape] };
    },
    unpack: ({ index, shape }) => tf.reshape(this.params[index].data, shape),
  };

  constructor(
    /** The module's own parameters (full); their data is freed here and lives in `shard`. */
    readonly params: readonly Tensor[],
    private readonly group: ProcessGroup,
    /** float16/bfloat16: the collectives send 2-byte values (the math stays float32). */
    private readonly commDtype: HalfDtype | undefined,
    /** The unit's module: its name and its parameters' names, for warnPartlyUnused. */
    private readonly unit?: Module,
  ) {
    this.shapes = params.map((p) => [...p.shape]);
    this.offsets = [];
    let at = 0;
    for (const p of params) {
      this.offsets.push(at);
      at += p.size;
    }
    this.total = at;
    this.shardSize = Math.ceil(at / group.size);
    const flat = new Float32Array(this.shardSize * group.size);
    for (const [i, p] of params.entries()) flat.set(p.data.dataSync() as Float32Array, this.offsets[i]);
    const start = group.rank * this.shardSize;
    this.shard = Parameter.fromValues(flat.slice(start, start + this.shardSize), [this.shardSize]);
    // each rank holds a distinct part of the gradient: its norm sums over the group (nn's clipGradNormDistributed)
    if (group.size > 1) markGradientShard(this.shard, group);
    this.free();
  }

  get isGathered(): boolean {
    return this.gathered;
  }

  /** Starts the all-gather (if not gathered or under way); `gather` awaits it. Collective. */
  prefetch(): void {
    if (!this.gathered && this.pending === null) this.pending = this.allGather(false);
  }

  /**
   * `float32`: the full parameters exactly as the shards hold them, whatever the commDtype (for
   * reading or exporting the model: through 2-byte values they were rounded).
   */
  async gather(float32 = false): Promise<void> {
    if (float32 && this.commDtype && !this.gathered && this.pending === null) this.pending = this.allGather(true);
    this.prefetch();
    await this.pending;
  }

  /**
   * The full parameters' current values into this rank's shard (torch's summon_full_params
   * writeback): what was written into them while gathered (a loaded state dict) was dropped at
   * the next free. A parameter whose data is gone keeps the shard's values.
   */
  writeBack(): void {
    const start = this.group.rank * this.shardSize;
    const values = Float32Array.from(this.shard.data.dataSync() as Float32Array);
    this.params.forEach((p, i) => {
      const from = this.offsets[i];
      const [lo, hi] = [Math.max(from, start), Math.min(from + sizeOf(this.shapes[i]), start + this.shardSize)];
      if (lo >= hi || p.isDisposed) return;
      values.set((p.data.dataSync() as Float32Array).subarray(lo - from, hi - from), lo - start);
    });
    this.shard.data = tensorFromFloat32(values, [this.shardSize]);
  }

  /** Frees the full parameters' data (their gradients stay). */
  free(): void {
    for (const p of this.params) p.free(RESHARDED);
    this.gathered = false;
  }

  /**
   * On the wasm heap (heap-collectives.ts): gathered into one tensor by comm, each parameter a
   * view of its part (FSDP2's views of the all-gather output; the unit's storage is freed with
   * the last of them). Else through host memory: the shard copied out of the backend, the
   * gathered values uploaded into the parameters.
   */
  private async allGather(float32: boolean): Promise<void> {
    const half = float32 ? undefined : this.commDtype;
    const inHeap = half ? null : gatherIntoTensor(this.group, this.shard.data);
    if (inHeap) {
      const full = await inHeap;
      const parts = storageViews(
        full,
        this.shapes.map((shape, i) => ({ offset: this.offsets[i], shape })),
      )!; // gatherIntoTensor gives a wasm tensor
      this.params.forEach((p, i) => {
        p.restore(parts[i]);
      });
      full.dispose();
    } else await this.allGatherOnHost(half);
    this.gathered = true;
    this.pending = null;
  }

  private async allGatherOnHost(half: HalfDtype | undefined): Promise<void> {
    const n = this.group.size;
    const local = hostBuffers.take(this.shardSize);
    const full = hostBuffers.take(this.shardSize * n);
    try {
      copyTensorInto(this.shard.data, local);
      if (half) {
        const out = new Uint16Array(full.length);
        await this.group.allGatherInto(out, narrow(local, half), { dtype: half }).wait();
        widen(out, half, full);
      } else {
        await this.group.allGatherInto(full, local).wait();
      }
      this.params.forEach((p, i) => {
        const at = this.offsets[i];
        p.restore(tensorFromFloat32(full.subarray(at, at + sizeOf(this.shapes[i])), this.shapes[i]));
      });
    } finally {
      hostBuffers.give(local);
      hostBuffers.give(full);
    }
  }

  /**
   * Averages the full parameters' gradients across the ranks and frees them; returns this rank's
   * slice as a new tensor of the shard's shape. A parameter without a gradient counts as zeros.
   * On the heap the gradients are concatenated into one tensor and reduce-scattered with AVG in
   * place (comm divides only this rank's chunk, in its addon, with AVG's overflow fallback); through
   * host memory each is divided by N in the backend first (FSDP's pre-divide: a sum of x / N cannot
   * overflow, and 2-byte values cannot carry the fallback). Collective: every rank calls it for the
   * same unit in the same order.
   */
  reduceScatterGrads(): Promise<tf.Tensor> {
    this.warnPartlyUnused();
    const n = this.group.size;
    if (this.commDtype || n === 1) return this.reduceScatterOnHost();
    // on the heap: the gradients (and the padding's zeros) concatenated into one tensor, reduced in place
    const flat = tf.keep(
      tf.tidy(() => {
        const parts = this.params.map((p, i) =>
          p.grad ? tf.reshape(p.grad, [-1]) : tf.fill([sizeOf(this.shapes[i])], 0),
        );
        if (this.shardSize * n > this.total) parts.push(tf.fill([this.shardSize * n - this.total], 0));
        // a storage of its own even when one part (tf.clone shares it): `flat` is overwritten in place
        return parts.length === 1 ? tf.mul(parts[0], 1) : tf.concat(parts);
      }),
    );
    const inHeap = reduceScatterTensor(this.group, flat);
    if (inHeap === null) {
      flat.dispose();
      return this.reduceScatterOnHost();
    }
    for (const p of this.params) p.grad = null;
    return inHeap;
  }

  /**
   * A parameter the loss did not use while others of its unit were: its slice of the flat gradient
   * is zeros, so where no rank used it the optimizer still steps it (momentum, weight decay, Adam's
   * moments move it), where one process and FSDP2's per-parameter shards leave a None gradient
   * alone. Said once per parameter; a unit the loss skips whole gets no gradient and is left alone.
   */
  private warnPartlyUnused(): void {
    const unused = this.params.flatMap((p, i) => (p.grad === null && !warnedUnused.has(p) ? [i] : []));
    if (unused.length === 0 || this.params.every((p) => p.grad === null)) return;
    for (const i of unused) warnedUnused.add(this.params[i]);
    const names = new Map(this.unit?.namedParameters().map(([name, p]) => [p as Tensor, name]));
    const named = unused.map((i) => names.get(this.params[i]) ?? `parameter ${i}`);
    process.emitWarning(
      `fullyShard unit ${this.unit?.constructor.name ?? ''}: ${named.join(', ')} ` +
        'got no gradient ' +
        `on rank ${this.group.ranks[this.group.rank]} while the rest of the unit did; FSDP averages it as zeros, and ` +
        'if no rank used it the optimizer still steps it as a zero gradient (momentum, weight decay and Adam move ' +
        'it, unlike one process). Give a branch the loss skips its own fullyShard unit.',
      { code: 'DDP_FSDP_PARTLY_UNUSED_UNIT' },
    );
  }

  private async reduceScatterOnHost(): Promise<tf.Tensor> {
    const n = this.group.size;
    const flat = hostBuffers.take(this.shardSize * n);
    const mine = hostBuffers.take(this.shardSize);
    try {
      this.params.forEach((p, i) => {
        const at = this.offsets[i];
        if (p.grad !== null) {
          const divided = n === 1 ? p.grad : tf.mul(p.grad, 1 / n);
          copyTensorInto(divided, flat, at);
          if (divided !== p.grad) divided.dispose();
        } else flat.fill(0, at, at + sizeOf(this.shapes[i]));
        p.grad = null;
      });
      flat.fill(0, this.total); // the padding: a reused buffer holds another unit's values there
      if (this.commDtype) {
        const out = new Uint16Array(this.shardSize);
        await this.group
          .reduceScatter(out, narrow(flat, this.commDtype), { op: ReduceOp.SUM, dtype: this.commDtype })
          .wait();
        widen(out, this.commDtype, mine);
      } else {
        await this.group.reduceScatter(mine, flat, { op: ReduceOp.SUM }).wait();
      }
      return tensorFromFloat32(mine, [this.shardSize]);
    } finally {
      hostBuffers.give(flat);
      hostBuffers.give(mine);
    }
  }
}

/** The host path's buffers, shared by every unit (see @ddp/zero's BufferPool). */
export const hostBuffers = new BufferPool(2);

/** Parameters already named in a DDP_FSDP_PARTLY_UNUSED_UNIT warning. */
const warnedUnused = new WeakSet<Tensor>();

const sizeOf = (shape: number[]) => shape.reduce((a, b) => a * b, 1);

function narrow(src: Float32Array, dtype: HalfDtype): Uint16Array {
  const to = dtype === 'float16' ? floatToHalf : floatToBfloat;
  return Uint16Array.from(src, to);
}

function widen(src: Uint16Array, dtype: HalfDtype, dst: Float32Array): void {
  const from = dtype === 'float16' ? halfToFloat : bfloatToFloat;
  for (let i = 0; i < src.length; i++) dst[i] = from(src[i]);
}

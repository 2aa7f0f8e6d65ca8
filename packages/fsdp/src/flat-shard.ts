import type { SavedTensorHooks, Tensor } from '@ddp/autograd';
import { type HalfDtype, type ProcessGroup, ReduceOp } from '@ddp/comm';
import { markGradientShard, markShardOf, Parameter } from '@ddp/nn';
import { ownedHeapView, storageViews, tensorFromFloat32, tf } from '@ddp/tensor';
import { gatherIntoTensor, reduceScatterInPlace } from './heap-collectives.js';
import { gatherOnHost, reduceScatterOnHost } from './host-collectives.js';

/** Why a full parameter has no data: its unit is resharded. */
const RESHARDED =
  "fsdp: this parameter is resharded (a unit's parameters exist only inside its forward and backward); " +
  'step the optimizer and clip (clipGradNormDistributed) over FSDPModule.parameters(), the shards';

/** How the heap path's reduce-scatters got their regions, summed over every unit (tests count the copies). */
export const gradientRegions = { inPlace: 0, copied: 0 };

/**
 * One unit's parameters, each held as a flat 1/N shard (FSDP2's per-parameter sharding): parameter i
 * of s_i elements is cut into N chunks of c_i = ⌈s_i / N⌉ elements and rank r holds elements
 * [r·c_i, (r+1)·c_i) as the Parameter `shards[i]`, zero-padded past s_i. The optimizer steps each
 * shard as a parameter of its own (groups, weight decay and state per parameter, as one process).
 * `gather` all-gathers the shards into the full parameters' data, one region of N·c_i elements per
 * parameter (every parameter a view of its region); `free` drops it again; `reduceScatterGrads`
 * averages the full gradients across the ranks and returns this rank's chunks, the shards' gradients.
 */
export class FlatShard {
  readonly shapes: number[][];
  /** Elements of each parameter's shard (its chunk, padding included). */
  readonly chunks: number[];
  /** Where each parameter's chunk starts among this rank's chunks back to back (its region: N× that). */
  readonly starts: number[];
  /** Elements this rank holds: the sum of the chunks. */
  readonly shardSize: number;
  readonly shards: Parameter[];
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
    /** The module's own parameters (full); their data is freed here and lives in `shards`. */
    readonly params: readonly Tensor[],
    readonly group: ProcessGroup,
    /** float16/bfloat16: the collectives send 2-byte values (the math stays float32). */
    private readonly commDtype: HalfDtype | undefined,
  ) {
    this.shapes = params.map((p) => [...p.shape]);
    this.chunks = params.map((p) => Math.ceil(p.size / group.size));
    this.starts = [];
    let at = 0;
    for (const c of this.chunks) {
      this.starts.push(at);
      at += c;
    }
    this.shardSize = at;
    this.shards = params.map((p, i) => Parameter.fromValues(this.chunkOf(p.data, i), [this.chunks[i]]));
    // each rank holds a distinct part of the gradient: its norm sums over the group (nn's clipGradNormDistributed)
    if (group.size > 1) for (const s of this.shards) markGradientShard(s, group);
    for (const [i, p] of params.entries()) markShardOf(p, this.shards[i]); // model.zeroGrad() clears the shards
    this.free();
  }

  /** This rank's chunk of parameter i's values `full`, zero-padded to the chunk's size. */
  private chunkOf(full: tf.Tensor, i: number): Float32Array {
    const c = this.chunks[i];
    const values = full.dataSync() as Float32Array;
    const chunk = new Float32Array(c);
    chunk.set(values.subarray(this.group.rank * c, Math.min(values.length, (this.group.rank + 1) * c)));
    return chunk;
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
   * The full parameters' current values into this rank's shards (torch's summon_full_params
   * writeback): what was written into them while gathered (a loaded state dict) was dropped at
   * the next free. A parameter whose data is gone keeps its shard's values.
   */
  writeBack(): void {
    this.params.forEach((p, i) => {
      if (!p.isDisposed) this.shards[i].data = tensorFromFloat32(this.chunkOf(p.data, i), [this.chunks[i]]);
    });
  }

  /** Frees the full parameters' data (their gradients stay). */
  free(): void {
    for (const p of this.params) p.free(RESHARDED, { keepShape: true });
    this.gathered = false;
  }

  /**
   * On the wasm heap (heap-collectives.ts): gathered into one tensor by comm, each parameter a
   * view of its region (FSDP2's views of the all-gather output; the unit's storage is freed with
   * the last of them). Else through host memory: the shards copied out of the backend, the
   * gathered values uploaded into the parameters.
   */
  private async allGather(float32: boolean): Promise<void> {
    const half = float32 ? undefined : this.commDtype;
    const inHeap = half
      ? null
      : gatherIntoTensor(
          this.group,
          this.shards.map((s) => s.data),
        );
    if (inHeap) {
      const full = await inHeap;
      const parts = storageViews(
        full,
        this.shapes.map((shape, i) => ({ offset: this.region(i), shape })),
      )!; // gatherIntoTensor gives a wasm tensor
      this.params.forEach((p, i) => {
        p.restore(parts[i]);
      });
      full.dispose();
    } else {
      const full = await gatherOnHost(this, half);
      this.params.forEach((p, i) => {
        p.restore(full[i]);
      });
    }
    this.gathered = true;
    this.pending = null;
  }

  /** Where parameter i's region (N chunks, rank r's at r·c_i) starts in the gathered buffer. */
  private region(i: number): number {
    return this.group.size * this.starts[i];
  }

  /** Through host memory: 2-byte values on the wire, a single rank, or no shared heap. */
  private reduceScatterOnHost(): Promise<tf.Tensor[]> {
    // it copies the gradients out before its first await: then they can go
    const reducing = reduceScatterOnHost(
      this,
      this.params.map((p) => p.grad),
      this.commDtype,
    );
    for (const p of this.params) p.grad = null;
    return reducing;
  }

  /**
   * Averages the full parameters' gradients across the ranks and frees them; returns this rank's
   * chunk of each as new tensors of the shards' shapes, or null for a parameter no rank gave a gradient
   * (keepUsed); one without a gradient here counts as zeros.
   * On the heap each gradient is reduce-scattered with AVG in its own storage (a copy padded to its
   * region where it does not fill it; comm divides only this rank's chunks, in its addon, with AVG's
   * overflow fallback); through host memory each is divided by N in the backend first (FSDP's
   * pre-divide: a sum of x / N cannot overflow, and 2-byte values cannot carry the fallback).
   * Collective: every rank calls it for the same unit in the same order.
   */
  reduceScatterGrads(): Promise<(tf.Tensor | null)[]> {
    const used = Int32Array.from(this.params, (p) => (p.grad === null ? 0 : 1));
    const n = this.group.size;
    if (this.commDtype || n === 1) return this.keepUsed(used, this.reduceScatterOnHost());
    // on the heap each gradient is reduced in its own storage where it fills its region alone there
    // (no copy); else a copy padded with zeros (zeros without a gradient) stands in for it
    const storages = new Set<object>();
    const copies: tf.Tensor[] = [];
    const regions = this.params.map((p, i) => {
      const grad = p.grad;
      const region = n * this.chunks[i];
      if (grad && grad.size === region && ownedHeapView(grad) && !storages.has(grad.dataId)) {
        storages.add(grad.dataId); // one gradient given to two parameters is reduced once in place, then copied
        gradientRegions.inPlace++;
        return grad;
      }
      const copy = tf.tidy(() => {
        if (!grad) return tf.fill([region], 0);
        const flat = tf.reshape(grad, [-1]);
        // a storage of its own (a reshape or clone shares it): comm overwrites it in place
        return region > flat.size ? tf.concat([flat, tf.fill([region - flat.size], 0)]) : tf.mul(flat, 1);
      });
      copies.push(copy);
      gradientRegions.copied++;
      return copy;
    });
    const inHeap = reduceScatterInPlace(this.group, regions);
    tf.dispose(copies);
    if (inHeap === null) return this.keepUsed(used, this.reduceScatterOnHost());
    for (const p of this.params) p.grad = null;
    return this.keepUsed(used, inHeap);
  }

  /**
   * The chunks of the parameters some rank gave a gradient; null for one no rank did, which the
   * optimizer then leaves alone as one process does (a region of zeros stepped it: momentum, weight
   * decay and Adam's moments moved a branch the loss skipped). The ranks agree on it with one small
   * MAX all-reduce, issued after the reduce-scatters; a parameter some ranks used averages zeros from
   * the others, as DDP's.
   */
  private async keepUsed(used: Int32Array, grads: Promise<tf.Tensor[]>): Promise<(tf.Tensor | null)[]> {
    const agreed = this.group.size > 1 ? this.group.allReduce(used, { op: ReduceOp.MAX }).wait() : Promise.resolve();
    agreed.catch(() => {}); // raised below, or with the reduce-scatters' own failure
    const chunks = await grads;
    try {
      await agreed;
    } catch (error) {
      tf.dispose(chunks);
      throw error;
    }
    return chunks.map((chunk, i) => {
      if (used[i] === 1) return chunk;
      chunk.dispose();
      return null;
    });
  }
}

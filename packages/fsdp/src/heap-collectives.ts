import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import { aliasGrowingHeap, growingHeapMoved } from '@ddp/shm';
import { copyTensorInto, ownedHeapView, tensorFromFloat32, tf, wasmHeapBuffer } from '@ddp/tensor';
import { FSDPError, globalRank } from './errors.js';

/**
 * FSDP's collectives on the wasm heap itself, as DDP reduces gradients where they live (DESIGN,
 * "Where gradients live"): @ddp/shm's aliasShared gives a SharedArrayBuffer over the heap, so
 * comm's thread gathers the shards straight into a tensor's storage and reduce-scatters a
 * tensor in place; no host buffers, no staging, no upload. The alias is @ddp/shm's, shared with
 * DDP's in-place gradients; the heap's address is checked after each op.
 * Without the addon, off wasm, or once the heap moved, FlatShard takes its host-copy path.
 */
/**
 * `t`'s own float32 storage as an array over shared memory, or null (see above; also when shared with another tensor).
 */
function sharedStorage(t: tf.Tensor): Float32Array | null {
  const own = ownedHeapView(t);
  const shared = own && aliasGrowingHeap(own.buffer as ArrayBuffer);
  return own && shared instanceof SharedArrayBuffer ? new Float32Array(shared, own.byteOffset, own.length) : null;
}

/** Raises when the heap moved while `op` wrote through the alias (its result never reached the tensors). */
function checkUnmoved(group: ProcessGroup, op: string): void {
  if (growingHeapMoved(wasmHeapBuffer()))
    throw new FSDPError(
      `rank ${globalRank(group)}: ${op}: the wasm heap moved while comm wrote into it; the values are lost`,
    );
}

/**
 * All-gathers every parameter's shard (this rank's, `shards[i]` of c_i elements) of every rank into a
 * new tensor: parameter i's region of N·c_i elements, rank r's chunk at r·c_i within it, the regions
 * back to back; one all-gather per region, written by comm in place. null when the heap cannot be
 * shared (the caller copies through host memory). Collective.
 */
export function gatherIntoTensor(group: ProcessGroup, shards: readonly tf.Tensor[]): Promise<tf.Tensor> | null {
  const n = group.size;
  const full = tf.keep(unfilled(n * shards.reduce((sum, s) => sum + s.size, 0)));
  const view = sharedStorage(full);
  if (view === null) {
    full.dispose();
    return null;
  }
  const regions = regionsOf(
    view,
    shards.map((s) => s.size),
    group,
  );
  for (const [i, { mine }] of regions.entries()) copyTensorInto(shards[i], mine);
  const gathers = regions.map(({ region, mine }) => group.allGatherInto(region, mine).wait());
  return settle(gathers, full, group, 'allGatherInto of parameters');
}

/** Each parameter's region of `view` (N·c_i elements, back to back) and this rank's chunk of it. */
function regionsOf(view: Float32Array, chunks: readonly number[], group: ProcessGroup) {
  let at = 0;
  return chunks.map((c) => {
    const region = view.subarray(at, at + group.size * c);
    at += group.size * c;
    return { region, mine: region.subarray(group.rank * c, (group.rank + 1) * c) };
  });
}

/** What tfjs-backend-wasm offers beyond the Backend interface: an output allocated (malloc) and left as it is. */
interface WasmOutputs {
  makeOutput(shape: number[], dtype: 'float32'): tf.TensorInfo;
}

/**
 * A float32 tensor of `size` elements whose values are whatever the heap held: the all-gather
 * writes every element (this rank's shard too), so zeroing it first was a pass over the whole
 * unit for nothing (a memset of every unit's parameters, twice a step). Off wasm, zeros.
 */
function unfilled(size: number): tf.Tensor {
  const backend = tf.backend() as unknown as Partial<WasmOutputs>;
  if (tf.getBackend() !== 'wasm' || typeof backend.makeOutput !== 'function') return tf.fill([size], 0);
  return tf.engine().makeTensorFromTensorInfo(backend.makeOutput([size], 'float32'));
}

/**
 * Reduce-scatters (AVG) each of `regions` in place (parameter i's gradient padded to N·c_i elements:
 * the gradient itself where it fills its region alone in its storage, else a padded copy), one
 * reduce-scatter per region; resolves with this rank's chunk of each as new tensors. The call holds
 * each region's storage until then: the caller may drop its tensors (a parameter's gradient) at once.
 * null, nothing held, when the heap cannot be shared. Collective.
 */
export function reduceScatterInPlace(group: ProcessGroup, regions: readonly tf.Tensor[]): Promise<tf.Tensor[]> | null {
  const views = regions.map(sharedStorage);
  if (views.some((v) => v === null)) return null;
  // a clone shares the storage (wasm counts its references): it outlives the caller's tensor
  const held = regions.map((t) => tf.keep(tf.clone(t)));
  const reduced = (views as Float32Array[]).map((region) => {
    const c = region.length / group.size;
    const mine = region.subarray(group.rank * c, (group.rank + 1) * c);
    return group.reduceScatter(mine, region, { op: ReduceOp.AVG, overwriteInput: true }).wait();
  });
  return settle(reduced, held, group, 'reduceScatter of gradients').then(() => {
    const out = held.map((t) => {
      const c = t.size / group.size;
      return copyOf(t, group.rank * c, [c]);
    });
    tf.dispose(held);
    return out;
  });
}

/**
 * A new tensor of `shape` holding `t`'s elements from `at`: one copy within the heap, read
 * through the shared alias (the allocation may grow the heap and detach a view of the old
 * ArrayBuffer). tf.slice on wasm first copies the whole input out of the heap (readSync).
 */
function copyOf(t: tf.Tensor, at: number, shape: number[]): tf.Tensor {
  const values = sharedStorage(t) ?? (t.dataSync() as Float32Array);
  return tensorFromFloat32(values.subarray(at, at + shape.reduce((a, b) => a * b, 1)), shape);
}

/**
 * Once every op settled: `held` if all succeeded on an unmoved heap, else `held` freed and the first
 * failure rethrown (after the others ended: they write into `held`).
 */
async function settle<T extends tf.Tensor | tf.Tensor[]>(
  ops: Promise<void>[],
  held: T,
  group: ProcessGroup,
  what: string,
): Promise<T> {
  try {
    await allSettled(ops);
    checkUnmoved(group, what);
  } catch (error) {
    tf.dispose(held); // the ops are over: comm no longer writes there
    throw error;
  }
  return held;
}

/** Resolves once every op ended (they write into shared buffers), rejecting with the first failure. */
export async function allSettled(ops: Promise<void>[]): Promise<void> {
  const failed = (await Promise.allSettled(ops)).find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

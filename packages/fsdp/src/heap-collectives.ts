import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import { aliasGrowingHeap, growingHeapMoved } from '@ddp/shm';
import { copyTensorInto, ownedHeapView, tensorFromFloat32, tf, wasmHeapBuffer } from '@ddp/tensor';
import { FSDPError } from './errors.js';

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
    throw new FSDPError(`rank ${group.rank}: ${op}: the wasm heap moved while comm wrote into it; the values are lost`);
}

/**
 * All-gathers `shard` (this rank's) of every rank into a new tensor of size × shard.size
 * elements, written by comm in place; null when the heap cannot be shared (the caller copies
 * through host memory). Collective.
 */
export function gatherIntoTensor(group: ProcessGroup, shard: tf.Tensor): Promise<tf.Tensor> | null {
  const s = shard.size;
  const full = tf.keep(unfilled(s * group.size));
  const view = sharedStorage(full);
  if (view === null) {
    full.dispose();
    return null;
  }
  const mine = view.subarray(group.rank * s, (group.rank + 1) * s);
  copyTensorInto(shard, mine);
  return settle(group.allGatherInto(view, mine).wait(), full, group, 'allGatherInto of parameters');
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
 * Reduce-scatters (AVG) `flat` (size × shardSize elements, a tensor this call takes and
 * disposes) in place; resolves with this rank's chunk as a new tensor. null, with `flat`
 * untouched, when the heap cannot be shared. Collective.
 */
export function reduceScatterTensor(group: ProcessGroup, flat: tf.Tensor): Promise<tf.Tensor> | null {
  const view = sharedStorage(flat);
  if (view === null) return null;
  const s = flat.size / group.size;
  const mine = view.subarray(group.rank * s, (group.rank + 1) * s);
  const reduced = group.reduceScatter(mine, view, { op: ReduceOp.AVG, overwriteInput: true }).wait();
  return settle(reduced, flat, group, 'reduceScatter of gradients').then(() => {
    const chunk = copyOf(flat, group.rank * s, [s]);
    flat.dispose();
    return chunk;
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

/** Once `op` settled: `held` if it succeeded on an unmoved heap, else `held` freed and the failure rethrown. */
async function settle(op: Promise<void>, held: tf.Tensor, group: ProcessGroup, what: string): Promise<tf.Tensor> {
  try {
    await op;
    checkUnmoved(group, what);
  } catch (error) {
    held.dispose(); // the op is over: comm no longer writes there
    throw error;
  }
  return held;
}

import type { DataId } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { activeWasmBackend, type WasmBackend } from './wasm-heap.js';

/** tfjs-wasm's own bookkeeping this file reaches into (internals of tfjs 4.x). */
interface ViewedBackend extends WasmBackend {
  wasm: WasmBackend['wasm'] & { tfjs: { disposeData(id: number): void } };
  dataIdMap: WasmBackend['dataIdMap'] & { delete(id: DataId): boolean };
  disposeData(dataId: DataId, force?: boolean): boolean;
}

/** Each view's storage owner (the tensor data it points into), until the view is freed. */
const ownerOf = new WeakMap<DataId, DataId>();
const patched = new WeakSet<object>();

/** Whether `dataId`'s storage is a view's: a part of another tensor's, shared with its other views. */
export const isStorageView = (dataId: DataId): boolean => ownerOf.has(dataId);

/**
 * Teaches the backend to free a view: its own record goes, the owner's storage only when its last
 * view and its own tensors are gone (each view holds one of the owner's references).
 */
function freeViews(backend: ViewedBackend): void {
  if (patched.has(backend)) return;
  patched.add(backend);
  const disposeData = backend.disposeData.bind(backend);
  backend.disposeData = (dataId: DataId, force = false): boolean => {
    const owner = ownerOf.get(dataId);
    if (owner === undefined) return disposeData(dataId, force);
    const data = backend.dataIdMap.get(dataId)!;
    data.refCount--;
    if (!force && data.refCount > 0) return false;
    ownerOf.delete(dataId);
    backend.wasm.tfjs.disposeData((data as unknown as { id: number }).id);
    backend.dataIdMap.delete(dataId);
    // the owner's tensors may all be disposed already: then the engine still lists its data
    if (disposeData(owner)) tf.engine().removeDataId(owner, backend as unknown as tf.KernelBackend);
    return true;
  };
}

/**
 * Float32 tensors over parts of `t`'s storage, no copy: part i holds `t`'s elements from
 * `parts[i].offset` in `parts[i].shape` (FSDP's parameters over one all-gathered unit, as FSDP2's
 * are views of its all-gather output; copying them out cost a pass over every unit, twice a step).
 * `t` may be disposed at once: its storage lives until its last view is disposed. Tensors are
 * immutable, and views are never owned alone (ownedHeapView and writeInPlace refuse them), so
 * nothing writes through one into its siblings. null off wasm, or for another dtype.
 */
export function storageViews(t: tf.Tensor, parts: { offset: number; shape: number[] }[]): tf.Tensor[] | null {
  const backend = activeWasmBackend() as ViewedBackend | null;
  const data = backend?.dataIdMap.get(t.dataId);
  if (!backend || !data || t.dtype !== 'float32' || typeof data.memoryOffset !== 'number') return null;
  for (const { offset, shape } of parts) {
    const size = shape.reduce((a, b) => a * b, 1);
    if (!Number.isInteger(offset) || offset < 0 || offset + size > t.size)
      throw new RangeError(`storageViews: elements [${offset}, ${offset + size}) are not within a tensor of ${t.size}`);
  }
  freeViews(backend);
  const owner = ownerOf.get(t.dataId) ?? t.dataId; // a view of a view points into the first owner
  const ownerData = backend.dataIdMap.get(owner)!;
  return parts.map(({ offset, shape }) => {
    const info = backend.makeOutput(shape, 'float32', data.memoryOffset! + offset * 4);
    ownerOf.set(info.dataId, owner);
    ownerData.refCount++;
    return tf.engine().makeTensorFromTensorInfo(info);
  });
}

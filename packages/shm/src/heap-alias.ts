import { loadSharedMemory } from './index.js';

/**
 * One SharedArrayBuffer over a growable wasm memory (tfjs-wasm's heap), so another thread can
 * read and write tensors where they live: DDP's in-place gradients and FSDP's collectives share
 * it. Growth replaces the memory's ArrayBuffer; V8 on 64-bit grows it in place (same address),
 * so the alias is made again over the new ArrayBuffer. If the address ever changed, views made
 * before point at freed memory: from then on every user is told 'moved' and copies instead.
 */
let alias: { heap: ArrayBuffer; shared: SharedArrayBuffer; address: number } | null = null;
let moved = false;

/** The alias of `heap` (the memory's current ArrayBuffer), or why there is none. */
export function aliasGrowingHeap(heap: ArrayBuffer): SharedArrayBuffer | 'no-addon' | 'moved' {
  if (moved) return 'moved';
  if (alias?.heap === heap) return alias.shared;
  const shm = loadSharedMemory();
  if (shm === null) return 'no-addon';
  const address = shm.address(heap);
  if (alias !== null && alias.address !== address) {
    moved = true;
    return 'moved';
  }
  alias = { heap, shared: shm.aliasShared(heap), address };
  return alias.shared;
}

/** Whether `heap` (the memory's current ArrayBuffer, null off wasm) is no longer where the alias points. */
export function growingHeapMoved(heap: ArrayBuffer | null): boolean {
  if (alias === null || heap === null || heap === alias.heap) return false;
  if (loadSharedMemory()?.address(heap) === alias.address) return false;
  moved = true;
  return true;
}

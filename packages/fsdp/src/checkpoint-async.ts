import { finishBeforeDestroyingGroups, newGroup, type ProcessGroup } from '@ddp/comm';
import { type AnyOptimizer, snapshot, writeSnapshot } from './checkpoint-save.js';
import type { FSDPModule } from './fully-shard.js';
import { BackgroundWriter } from './safetensors-writer.js';

/**
 * Checkpoints that do not stall training (DCP's async_save): `save` copies this rank's shards and
 * optimizer state to host memory and returns; the files are written, confirmed and committed in
 * the background, with the same atomic protocol as `saveFSDPCheckpoint`: checksums and writes on
 * a thread of its own (at a lower priority), the coordination on the main thread. The background save
 * coordinates over a process group of its own, so its collectives never interleave with the
 * training's. One save is in flight at a time: the next `save` first waits for the previous one
 * (and rethrows its failure). `destroyProcessGroup` waits for the save in flight.
 */
export class AsyncCheckpointer {
  private group: ProcessGroup | null = null;
  private inFlight: Promise<void> | null = null;
  /** Checksums and writes the files on a thread of its own (started here, not in the first save). */
  private readonly writer = new BackgroundWriter();
  /**
   * The host copies, kept from save to save (DCP's cached staging buffers): no allocation, page
   * faults or garbage per save. Shared with the writer thread, which reads them without a copy; a
   * save overwrites them only after the previous one is done.
   */
  private readonly staging = new Map<string, Float32Array>();

  constructor(readonly root: FSDPModule) {}

  /**
   * Collective over the root's group (the first call creates the checkpoint group with
   * `newGroup`, which every rank of the world calls). Returns once the host copy is taken;
   * `done` settles when the entry is committed (or the save failed).
   */
  async save(
    dir: string,
    contents: { optimizer: AnyOptimizer; step: number; extra?: unknown },
  ): Promise<{ done: Promise<void> }> {
    await this.wait();
    this.group ??= await newGroup([...this.root.processGroup.ranks]);
    const snap = snapshot(this.root, contents.optimizer, contents.step, contents.extra, (key, length) =>
      this.stagingBuffer(key, length),
    );
    const done = writeSnapshot(dir, snap, this.group!, 'async', (...args) => this.writer.write(...args));
    this.inFlight = done;
    done.catch(() => {}); // reported by `done` and by the next save or wait()
    finishBeforeDestroyingGroups(done); // a script ending right after its last save still commits it
    return { done };
  }

  private stagingBuffer(key: string, length: number): Float32Array {
    let buffer = this.staging.get(key);
    if (buffer?.length !== length) {
      buffer = new Float32Array(new SharedArrayBuffer(length * Float32Array.BYTES_PER_ELEMENT));
      this.staging.set(key, buffer);
    }
    return buffer;
  }

  /** Waits for the save in flight, if any; rethrows its failure. */
  async wait(): Promise<void> {
    const pending = this.inFlight;
    this.inFlight = null;
    await pending;
  }
}

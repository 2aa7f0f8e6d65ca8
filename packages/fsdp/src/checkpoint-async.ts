import { duplicateGroup, finishBeforeDestroyingGroups, type ProcessGroup } from '@ddp/comm';
import { refusePendingGradients, type SaveOptions, takeCommitTurn } from '@ddp/nn';
import { ShardedCheckpointError } from '@ddp/zero';
import {
  type AnyOptimizer,
  checkContents,
  type ShardWriter,
  type StagingBuffers,
  snapshot,
  writeSnapshot,
} from './checkpoint-save.js';
import { FSDPError, globalRank } from './errors.js';
import type { FSDPModule } from './fully-shard.js';
import { BackgroundWriter } from './safetensors-writer.js';

/**
 * Checkpoints that do not stall training (DCP's async_save): `save` copies this rank's shards and
 * optimizer state to host memory at the call and returns; the files are written, confirmed and
 * committed in the background, with the same atomic protocol as `saveFSDPCheckpoint`: checksums
 * and writes on a thread of its own (at a lower priority), the coordination on the main thread.
 * The background save coordinates over a process group of its own, so its collectives never
 * interleave with the training's. One save writes at a time: the next one's files wait for the
 * previous one's commit, and the next `save` returns only once it has (its copy taken at the call
 * all the same), so a backlog never grows past the save writing and the one waiting. Each save's
 * failure is its `done`'s; `wait()` raises the newest save's once; `destroyProcessGroup` waits for
 * the save in flight and raises the newest save's failure unless `wait()` has (or a later save
 * committed).
 */
/** Ends the writer thread of a checkpointer dropped without close(). */
const writerThreads = new FinalizationRegistry<BackgroundWriter>((writer) => void writer.close());

export class AsyncCheckpointer {
  private group: Promise<ProcessGroup> | null = null;
  private inFlight: Promise<string> | null = null;
  /** Saves called and not yet settled: while one is, the next copies into fresh buffers, not the staging ones. */
  private pending = 0;
  /** The newest settled save's failure, until wait() raises it (or a later save commits). */
  private unreported: { error: unknown } | null = null;
  /** Saves whose failure wait() has raised: raised once. */
  private readonly reported = new WeakSet<Promise<string>>();
  /** Checksums and writes the files on a thread of its own (started here, not in the first save). */
  private readonly writer = new BackgroundWriter();
  /**
   * The host copies, kept from save to save (DCP's cached staging buffers): no allocation, page
   * faults or garbage per save. Shared with the writer thread, which reads them without a copy; a
   * save copies into them only when no other is pending.
   */
  private readonly staging = new Map<string, Float32Array>();

  private closed = false;

  constructor(readonly root: FSDPModule) {
    writerThreads.register(this, this.writer, this);
  }

  /**
   * Waits for the save in flight, then ends the writer thread (each checkpointer has one: a
   * program making one per run kept them all, ~60 MB each); later saves raise. A checkpointer
   * dropped without close() ends its thread when it is garbage-collected.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    writerThreads.unregister(this);
    await this.inFlight?.catch(() => {});
    await this.writer.close();
  }

  /**
   * Collective over the root's group (the first call creates the checkpoint group with comm's
   * `duplicateGroup`, over the root's group only). The host copy is taken at the call, before
   * anything is awaited: a save not awaited while training went on saved a later step's state
   * (and each rank another one) under the step given. `done` settles when the entry is committed
   * (or the save failed), with its path. `expectNewest` as nn's SaveOptions (the entry the run
   * last saved or loaded, or null; this checkpointer's last entry there passes too, so saves
   * issued back to back need not know each other's entries).
   */
  async save(
    dir: string,
    contents: { optimizer: AnyOptimizer; step: number; extra?: unknown },
    { expectNewest }: SaveOptions = {},
  ): Promise<{ done: Promise<string> }> {
    if (this.closed)
      throw new FSDPError(`rank ${globalRank(this.root.processGroup)}: AsyncCheckpointer.save after close()`);
    checkContents('AsyncCheckpointer.save', contents, ['optimizer', 'step', 'extra'], ['optimizer', 'step']);
    refusePendingGradients(
      `AsyncCheckpointer.save(${dir})`,
      this.root.parameters(),
      (m) => new ShardedCheckpointError(m),
    );
    const stage: StagingBuffers | undefined = this.pending === 0 ? (k, n) => this.stagingBuffer(k, n) : undefined;
    const snap = snapshot(this.root, contents.optimizer, contents.step, contents.extra, stage);
    const turn = takeCommitTurn(dir);
    const previous = this.inFlight;
    // a failed creation is not kept: the next save tries again
    this.group ??= duplicateGroup(this.root.processGroup).catch((error) => {
      this.group = null;
      throw error;
    });
    const group = this.group;
    this.pending++;
    const done = (async () => {
      try {
        await previous?.catch(() => {});
        const write: ShardWriter = (...args) => this.writer.write(...args);
        return await writeSnapshot(dir, snap, await group, 'async', turn, { expectNewest, owner: this }, write);
      } finally {
        turn.done();
        this.pending--;
      }
    })();
    this.inFlight = done;
    done.then(
      () => {
        if (this.inFlight === done) this.unreported = null;
      },
      (error) => {
        if (!this.reported.has(done)) this.unreported = { error };
      },
    );
    // a script ending right after its last save still commits it, or hears why not
    finishBeforeDestroyingGroups(done, () => this.unreported?.error);
    await group.catch((error) => {
      this.reported.add(done); // raised here, to save's caller: not again by destroyProcessGroup
      throw error;
    });
    // back-pressure, as torch advises waiting on the last async_save's future before the next: saves issued
    // faster than the low-priority writer commits them piled up, each holding a host copy, and none
    // committed for 46 steps of 80 (a kill then resumed from nothing; probe AC). One waits at most.
    await previous?.catch(() => {});
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

  /** Waits for the newest save, if any; rethrows its failure the first time. */
  async wait(): Promise<void> {
    const save = this.inFlight;
    if (save === null || this.reported.has(save)) return;
    try {
      await save;
    } catch (error) {
      this.reported.add(save);
      if (this.unreported?.error === error) this.unreported = null;
      throw error;
    }
  }
}

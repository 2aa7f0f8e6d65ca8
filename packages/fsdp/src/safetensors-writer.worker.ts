// The thread of a BackgroundWriter (safetensors-writer.ts): checksums and writes the files of an
// asynchronous checkpoint, so none of that runs on the training's main thread.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { FileWriteError, saveSafetensorsSync } from '@ddp/nn';
import type { WriteReply, WriteRequest } from './safetensors-writer.js';

/**
 * The thread's nice value: the lowest, so on a host whose every core runs a rank the writer runs
 * in the time they leave idle (waiting on collectives) rather than theirs: at nice 10 it took about
 * a tenth of a busy core, and the step it overlapped waited for that. A save still finishes under
 * sustained load (CFS gives nice 19 a small share; the commit waits for it rather than a step).
 * Linux sets it per thread (its id from /proc/thread-self); elsewhere the thread keeps its priority.
 */
const WRITER_NICE = 19;
try {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), WRITER_NICE);
} catch {
  // not Linux: normal priority
}

const port = parentPort!;
// synchronous writes: the checksums and the copies into the page cache run on this (niced) thread,
// not on libuv's shared pool
port.on('message', ({ id, path, tensors, metadata }: WriteRequest) => {
  try {
    saveSafetensorsSync(path, tensors, metadata);
    port.postMessage({ id } satisfies WriteReply);
  } catch (error) {
    const cause = error instanceof FileWriteError ? error.cause : error;
    const { message, code } = cause as NodeJS.ErrnoException;
    port.postMessage({ id, error: { message: String(message), code } } satisfies WriteReply);
  }
});

// The thread of a BackgroundWriter (safetensors-writer.ts): checksums and writes the files of an
// asynchronous checkpoint, so none of that runs on the training's main thread.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { FileWriteError, saveSafetensorsSync } from '@ddp/nn';
import type { WriteReply, WriteRequest } from './safetensors-writer.js';

/**
 * The thread's nice value: below the training's threads, so on a host whose every core runs a
 * rank the writer takes mostly the time they leave idle (waiting on collectives) rather than
 * theirs. Not lowest: a save must still finish under sustained load. Linux sets it per thread
 * (its id from /proc/thread-self); elsewhere the thread keeps its priority.
 */
const WRITER_NICE = 10;
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

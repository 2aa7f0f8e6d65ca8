// The thread of a BackgroundWriter (safetensors-writer.ts): serialises, checksums and writes the
// files of an asynchronous checkpoint, so none of that runs on the training's main thread.
import { parentPort } from 'node:worker_threads';
import { FileWriteError, saveSafetensors } from '@ddp/nn';
import type { WriteReply, WriteRequest } from './safetensors-writer.js';

const port = parentPort!;
port.on('message', async ({ id, path, tensors, metadata }: WriteRequest) => {
  try {
    await saveSafetensors(path, tensors, metadata);
    port.postMessage({ id } satisfies WriteReply);
  } catch (error) {
    const cause = error instanceof FileWriteError ? error.cause : error;
    const { message, code } = cause as NodeJS.ErrnoException;
    port.postMessage({ id, error: { message: String(message), code } } satisfies WriteReply);
  }
});

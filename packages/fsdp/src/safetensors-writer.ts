import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { FileWriteError, type SafeTensor } from '@ddp/nn';

export interface WriteRequest {
  id: number;
  path: string;
  tensors: [string, SafeTensor][];
  metadata: Record<string, string>;
}
export interface WriteReply {
  id: number;
  error?: { message: string; code?: string };
}

/** Source (tsx, vitest) or built (dist) flavour of this module, to find the worker beside it. */
const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';

/** From source the thread first registers tsx's loader itself: tsx's --import hook does not reach workers. */
function startWorker(): Worker {
  const url = new URL(`./safetensors-writer.worker${ext}`, import.meta.url);
  if (ext === '.js') return new Worker(url);
  const tsxDir = dirname(createRequire(import.meta.url).resolve('tsx/package.json'));
  const api = pathToFileURL(`${tsxDir}/dist/esm/api/index.mjs`).href;
  const load = `return import(${JSON.stringify(url.href)});`;
  const code = `import(${JSON.stringify(api)}).then((m) => { m.register(); ${load} })`;
  return new Worker(code, { eval: true });
}

/**
 * Writes safetensors files (CRC-32 and the atomic write of @ddp/nn's `saveSafetensorsSync`) on a
 * thread of its own, so a background checkpoint costs the training's main thread only the host
 * copy: on the main thread, the checksums and writes stalled the step it overlapped by more than
 * a synchronous save. Arrays on a SharedArrayBuffer reach the thread without a copy (the caller
 * must leave them alone until the write settles); others are copied. The thread starts with the
 * writer, does not keep the process alive while idle, and ends with `close`.
 */
export class BackgroundWriter {
  private readonly worker = startWorker();
  private readonly waiting = new Map<number, { resolve: () => void; reject: (e: Error) => void; path: string }>();
  private nextId = 0;
  private failure: Error | null = null;
  private closed = false;

  constructor() {
    this.worker.on('message', ({ id, error }: WriteReply) => {
      const job = this.waiting.get(id)!;
      this.settled(id);
      const cause = error && Object.assign(new Error(error.message), { code: error.code });
      if (cause) job.reject(new FileWriteError(job.path, cause));
      else job.resolve();
    });
    const fail = (e: Error) => {
      this.failure = e;
      for (const [id, job] of this.waiting) {
        this.settled(id);
        job.reject(new FileWriteError(job.path, e));
      }
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => {
      if (!this.closed) fail(new Error(`the checkpoint writer thread exited (code ${code})`));
    });
    this.worker.unref(); // after the listeners: adding a 'message' listener refs the worker again
  }

  /** Writes `tensors` to `path` (atomically, as saveSafetensors). */
  write(path: string, tensors: Map<string, SafeTensor>, metadata: Record<string, string>): Promise<void> {
    if (this.failure) return Promise.reject(new FileWriteError(path, this.failure));
    const id = this.nextId++;
    const done = new Promise<void>((resolve, reject) => this.waiting.set(id, { resolve, reject, path }));
    if (this.waiting.size === 1) this.worker.ref(); // keep the process alive until the file is written
    this.worker.postMessage({ id, path, tensors: [...tensors], metadata } satisfies WriteRequest);
    return done;
  }

  /** Ends the thread (a write in flight fails); later writes fail. Resolves once it has exited. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.failure ??= new Error('the checkpoint writer was closed');
    await this.worker.terminate();
  }

  private settled(id: number): void {
    this.waiting.delete(id);
    if (this.waiting.size === 0) this.worker.unref();
  }
}

import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { DataParallelError } from './errors.js';
import type { FromReplica, ReplicaInit, ToReplica } from './protocol.js';

const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';

// From source, a replica thread resolves @ddp packages to their src/ as the main thread does
// (vitest or --conditions=@ddp/source there; neither reaches a worker): a resolve hook adds the condition.
const sourceCondition = `data:text/javascript,${encodeURIComponent(
  "export const resolve = (s, c, next) => next(s, { ...c, conditions: [...c.conditions, '@ddp/source'] });",
)}`;

/**
 * The replica worker file beside this module. From source, or for a model module in TypeScript (a tsx
 * script's `./model.ts`: installed, the thread could not load it), the thread registers tsx first: its
 * --import hook does not reach workers.
 */
export function startReplica(init: ReplicaInit): Worker {
  const url = new URL(`./replica-worker${ext}`, import.meta.url);
  const typescript = /\.[cm]?ts$/.test(new URL(init.factoryUrl).pathname);
  if (ext === '.js' && !typescript) return new Worker(url, { workerData: init });
  const api = pathToFileURL(`${tsxFor(init.factoryUrl)}/dist/esm/api/index.mjs`).href;
  const fromSource =
    ext === '.ts' ? `(await import('node:module')).register(${JSON.stringify(sourceCondition)}); ` : '';
  const code =
    `import(${JSON.stringify(api)}).then(async (m) => { m.register(); ${fromSource}` +
    `return import(${JSON.stringify(url.href)}); })`;
  return new Worker(code, { eval: true, workerData: init });
}

/** tsx's folder, as this package or the model module finds it. */
function tsxFor(factoryUrl: string): string {
  for (const from of [import.meta.url, factoryUrl]) {
    try {
      return dirname(createRequire(from).resolve('tsx/package.json'));
    } catch {}
  }
  throw new DataParallelError(
    `DataParallel: the model module ${new URL(factoryUrl).pathname} is TypeScript, and tsx (which runs it on the ` +
      'replica threads) is not installed beside it: install tsx, or give a .js or .mjs module',
  );
}

/** One replica thread: requests answered in order. */
export class Replica {
  private readonly waiting: { resolve: (m: FromReplica) => void; reject: (e: Error) => void }[] = [];
  private dead: Error | null = null;
  /** Its first message, 'ready' (awaited from the start: it may come before anyone asks). */
  readonly ready: Promise<FromReplica>;

  constructor(
    readonly index: number,
    readonly worker: Worker,
    readonly grads: Float32Array,
  ) {
    this.ready = this.answer('start');
    this.ready.catch(() => {}); // awaited by create, which may give up on an earlier replica first
    worker.on('message', (m: FromReplica) => {
      this.waiting.shift()?.resolve(m);
      this.holdProcess();
    });
    worker.on('error', (e) => this.fail(new DataParallelError(`DataParallel replica ${index} crashed: ${e.message}`)));
    worker.on('exit', (code) =>
      this.fail(new DataParallelError(`DataParallel replica ${index} exited (code ${code})`)),
    );
  }

  /**
   * The thread keeps the process alive only while an answer is awaited: a script that ended
   * without dispose() never exited (torch needs none).
   */
  private holdProcess(): void {
    if (this.waiting.length > 0) this.worker.ref();
    else this.worker.unref();
  }

  private fail(e: Error): void {
    this.dead ??= e;
    for (const w of this.waiting.splice(0)) w.reject(this.dead);
  }

  /** Sends m and resolves with the answer; a replica's error rejects naming it and `op`. */
  request(m: ToReplica, op: string): Promise<FromReplica> {
    if (this.dead) return Promise.reject(this.dead);
    const answer = this.answer(op);
    this.worker.postMessage(m);
    return answer;
  }

  /** Sends m, which the replica does not answer ('release'). */
  notify(m: ToReplica): void {
    if (!this.dead) this.worker.postMessage(m);
  }

  /** The next message from the replica (they answer in order). */
  private async answer(op: string): Promise<FromReplica> {
    const r = await new Promise<FromReplica>((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.holdProcess();
    });
    if (r.type === 'error')
      throw new DataParallelError(`DataParallel replica ${this.index}, ${op}: ${r.name}: ${r.message}`);
    return r;
  }
}

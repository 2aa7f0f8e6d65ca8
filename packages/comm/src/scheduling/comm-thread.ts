import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { CommError, deserializeError, serializeError } from '../errors.js';
import type { HostLayout } from '../rendezvous/host-layout.js';
import type { PeerAddress } from '../transport/socket-io.js';
import type { FromWorker, InitRequest, OpRequest, OpResult, ToWorker } from './protocol.js';

/** Source (tsx, vitest) or built (dist) flavour of this module, to find the worker beside it. */
const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';

/**
 * Starts the worker file beside this module. From source (.ts, under tsx or vitest) the
 * thread first registers tsx's loader itself: tsx's --import hook does not reach workers.
 */
function startWorker(): Worker {
  const url = new URL(`./comm-worker${ext}`, import.meta.url);
  if (ext === '.js') return new Worker(url);
  const tsxDir = dirname(createRequire(import.meta.url).resolve('tsx/package.json'));
  const api = pathToFileURL(`${tsxDir}/dist/esm/api/index.mjs`).href;
  const code =
    `import(${JSON.stringify(api)}).then((m) => { m.register(); return ` + `import(${JSON.stringify(url.href)}); })`;
  return new Worker(code, { eval: true });
}

type Waiter = { resolve: (m: FromWorker) => void; reject: (e: CommError) => void };

/** The main thread's handle on the comm worker thread. */
export class CommThread {
  private readonly worker: Worker;
  private nextId = 1;
  private readonly ops = new Map<
    number,
    { resolve: (r: OpResult | undefined) => void; reject: (e: CommError) => void }
  >();
  private control: Waiter | null = null;
  private dead: CommError | null = null;
  /** Set as destroyProcessGroup starts: no op may start after it. */
  closed = false;

  private constructor(private readonly rank: number) {
    this.worker = startWorker();
    this.worker.on('message', (m: FromWorker) => this.onMessage(m));
    this.worker.on('error', (e) =>
      this.die(new CommError(`rank ${rank}: comm worker crashed: ${e.message}`, { rank })),
    );
    this.worker.on('exit', (code) =>
      this.die(new CommError(`rank ${rank}: comm worker exited (code ${code})`, { rank })),
    );
  }

  /** Starts the worker and its listeners; returns the thread and this rank's address. */
  static async start(init: Omit<InitRequest, 'type'>): Promise<{ thread: CommThread; address: PeerAddress }> {
    const thread = new CommThread(init.rank);
    const reply = await thread.call({ type: 'init', ...init });
    if (reply.type !== 'listening') throw new CommError(`unexpected worker reply ${reply.type}`);
    return { thread, address: reply.address };
  }

  /** The comm thread poisoned a group (mismatch, lost peer, timeout). */
  onPoisoned: (groupId: number, err: CommError) => void = () => {};

  /** Tells the comm thread that the main thread's executor poisoned a group. */
  poison(groupId: number, err: CommError): void {
    if (this.dead) return;
    this.worker.postMessage({
      type: 'poison',
      groupId,
      error: serializeError(err),
      announce: false,
    } satisfies ToWorker);
  }

  /** A call failed on this rank before reaching an executor: the comm thread aborts the group on every member. */
  abort(groupId: number, err: CommError): void {
    if (this.dead) return;
    this.worker.postMessage({ type: 'poison', groupId, error: serializeError(err), announce: true } satisfies ToWorker);
  }

  private onMessage(m: FromWorker): void {
    if (m.type === 'poisoned') {
      this.onPoisoned(m.groupId, deserializeError(m.error));
      return;
    }
    if (m.type === 'done') {
      const op = this.ops.get(m.id);
      if (!op) return;
      this.ops.delete(m.id);
      if (m.error) op.reject(deserializeError(m.error));
      else op.resolve(m.result);
      return;
    }
    const c = this.control;
    this.control = null;
    if (!c) return;
    if (m.type === 'failed') c.reject(deserializeError(m.error));
    else c.resolve(m);
  }

  private die(err: CommError): void {
    this.dead ??= err;
    for (const op of this.ops.values()) op.reject(err);
    this.ops.clear();
    this.control?.reject(err);
    this.control = null;
  }

  /** A request answered by one control reply (init, connect, close). */
  private call(msg: ToWorker): Promise<FromWorker> {
    if (this.dead) return Promise.reject(this.dead);
    return new Promise((resolve, reject) => {
      this.control = { resolve, reject };
      this.worker.postMessage(msg);
    });
  }

  async connect(addrs: PeerAddress[], timeoutMs: number): Promise<void> {
    await this.call({ type: 'connect', addrs, timeoutMs });
  }

  addGroup(groupId: number, ranks: number[], shm: SharedArrayBuffer | null, hosts: HostLayout | null): void {
    this.worker.postMessage({ type: 'group', groupId, ranks, shm, hosts } satisfies ToWorker);
  }

  /** Submits an op; resolves when the worker has completed it. */
  run(req: Omit<OpRequest, 'type' | 'id'>): Promise<OpResult | undefined> {
    if (this.dead) return Promise.reject(this.dead);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.ops.set(id, { resolve, reject });
      this.worker.postMessage({ type: 'op', id, ...req } satisfies ToWorker);
    });
  }

  /** Says goodbye to the peers, closes sockets and ends the thread. */
  async close(): Promise<void> {
    this.closed = true;
    if (!this.dead) {
      await this.call({ type: 'close' }).catch(() => {});
    }
    this.dead ??= new CommError(`rank ${this.rank}: process group destroyed`, { rank: this.rank });
    await this.worker.terminate();
  }
}

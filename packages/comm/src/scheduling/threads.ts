import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isMainThread, type MessagePort, parentPort, Worker, workerData } from 'node:worker_threads';
import { CommError, deserializeError, NotInitializedError, serializeError } from '../errors.js';
import { Executor } from '../execution/executor.js';
import type { SharedMemory } from '../native.js';
import type { HostLayout } from '../rendezvous/host-layout.js';
import { type MeshOptions, PeerMesh } from '../transport/peer-mesh.js';
import { Lane, sharedMemory } from '../transport/shm-lane.js';
import { type PeerAddress, wireCounterViews } from '../transport/socket-io.js';
import type { FromWorker, InitRequest, OpRequest, OpResult, ToWorker } from './protocol.js';

/**
 * The two threads a group's ops run on (op-dispatcher.ts picks one per op): the main thread
 * itself (MainRunner) and the process's comm worker thread (CommThread: the main thread's
 * handle; serveCommThread: the worker's side, this same module started as the worker).
 * Both hand the op to their thread's Executor.run.
 */

/** Marks the worker this module starts, so that, loaded there, it serves the comm thread. */
const COMM_THREAD = 'ddp-comm-thread';

/**
 * Small collectives run on the main thread itself, on a mesh of their own: for them the
 * two thread hand-offs (main → comm thread → main) cost more than the work, and there is
 * nothing to overlap. Which ops come here is decided by op-dispatcher.ts's onMainThread, the
 * same way on every rank. The main mesh sends no heartbeats (a main thread busy computing
 * must not look dead; the comm thread's mesh watches liveness).
 */
export class MainRunner {
  readonly mesh: PeerMesh;
  readonly executor: Executor;
  /** Set as destroyProcessGroup starts: no op may start after it. */
  closed = false;

  constructor(opts: MeshOptions, mem: SharedMemory | null) {
    this.mesh = new PeerMesh({ ...opts, heartbeat: false });
    this.executor = new Executor(this.mesh, mem, Lane.Main);
  }

  listen(bindHost: string): Promise<PeerAddress> {
    return this.mesh.listen(bindHost);
  }

  connect(addrs: PeerAddress[], timeoutMs: number): Promise<void> {
    return this.mesh.connect(addrs, timeoutMs);
  }

  addGroup(groupId: number, ranks: number[], shm: SharedArrayBuffer | null, hosts: HostLayout | null): void {
    this.executor.groups.add(groupId, ranks, shm, hosts);
  }

  run(req: Omit<OpRequest, 'type' | 'id'>): Promise<OpResult | undefined> {
    return this.executor.run(req);
  }

  close(): Promise<void> {
    this.closed = true;
    const rank = this.mesh.opts.rank;
    const why = `rank ${rank}: the process group was destroyed while this op was running`;
    this.executor.groups.closeAll(new NotInitializedError(why, { rank, op: 'destroyProcessGroup' }));
    return this.mesh.close();
  }
}

/**
 * Starts this module as the comm worker. From source (.ts, under tsx or vitest) the thread
 * first registers tsx's loader itself: tsx's --import hook does not reach workers.
 */
function startWorker(): Worker {
  const url = new URL(import.meta.url);
  const opts = { workerData: { [COMM_THREAD]: true } };
  if (!url.pathname.endsWith('.ts')) return new Worker(url, opts);
  const tsxDir = dirname(createRequire(import.meta.url).resolve('tsx/package.json'));
  const api = pathToFileURL(`${tsxDir}/dist/esm/api/index.mjs`).href;
  const code =
    `import(${JSON.stringify(api)}).then((m) => { m.register(); return ` + `import(${JSON.stringify(url.href)}); })`;
  return new Worker(code, { ...opts, eval: true });
}

type Waiter = { resolve: (m: FromWorker) => void; reject: (e: CommError) => void };

/** The main thread's handle on the comm worker thread (its side: serveCommThread, below). */
export class CommThread {
  private readonly worker: Worker;
  private nextId = 1;
  private readonly ops = new Map<
    number,
    { name: string; resolve: (r: OpResult | undefined) => void; reject: (e: CommError) => void }
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
      if (m.error) op.reject(this.interrupted(op.name, deserializeError(m.error)));
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
    for (const op of this.ops.values()) op.reject(this.interrupted(op.name, err));
    this.ops.clear();
    this.control?.reject(err);
    this.control = null;
  }

  /**
   * An op that fails once destroyProcessGroup has begun failed because of it (its sockets or its
   * thread closed under it): it says so, typed as an op issued after the destroy, whatever broke.
   */
  private interrupted(op: string, err: CommError): CommError {
    if (!this.closed) return err;
    return new NotInitializedError(
      `rank ${this.rank}: ${op} was still in flight when destroyProcessGroup closed its group`,
      { rank: this.rank, op, cause: err },
    );
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
      this.ops.set(id, { name: req.op, resolve, reject });
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

/** The comm worker thread's side: owns its peer connections and runs the ops posted to it. */
function serveCommThread(port: MessagePort): void {
  const post = (m: FromWorker) => port.postMessage(m);
  let mesh: PeerMesh | null = null;
  let executor: Executor | null = null;
  port.on('message', (msg: ToWorker) => {
    switch (msg.type) {
      case 'init': {
        const { rank, worldSize, secret, runId, hostId, forceTcp } = msg;
        const heartbeatClock = new Float64Array(msg.heartbeatClock);
        const wireCounters = wireCounterViews(msg.wireStats).commThread;
        mesh = new PeerMesh({ rank, worldSize, secret, runId, hostId, forceTcp, wireCounters, heartbeatClock });
        executor = new Executor(mesh, sharedMemory(), Lane.Comm);
        executor.groups.onPoison = (groupId, err) => post({ type: 'poisoned', groupId, error: serializeError(err) });
        mesh.listen(msg.bindHost).then(
          (address) => post({ type: 'listening', address }),
          (e) => post({ type: 'failed', error: serializeError(e) }),
        );
        return;
      }
      case 'connect':
        mesh?.connect(msg.addrs, msg.timeoutMs).then(
          () => post({ type: 'connected' }),
          (e) => post({ type: 'failed', error: serializeError(e) }),
        );
        return;
      case 'group':
        executor?.groups.add(msg.groupId, msg.ranks, msg.shm, msg.hosts);
        return;
      case 'op':
        executor?.run(msg).then(
          (result) => post({ type: 'done', id: msg.id, result }),
          (err) => post({ type: 'done', id: msg.id, error: serializeError(err) }),
        );
        return;
      case 'poison':
        if (msg.announce) executor?.groups.abort(msg.groupId, deserializeError(msg.error));
        else executor?.groups.adoptPoison(msg.groupId, deserializeError(msg.error));
        return;
      case 'close':
        (mesh ? mesh.close() : Promise.resolve()).finally(() => {
          post({ type: 'closed' });
          port.close();
        });
        return;
    }
  });
}

if (!isMainThread && parentPort && workerData?.[COMM_THREAD] === true) serveCommThread(parentPort);

import { type CommError, deserializeError, NotInitializedError } from '../errors.js';
import { Executor } from '../execution/executor.js';
import type { SharedMemory } from '../native.js';
import type { HostLayout } from '../rendezvous/host-layout.js';
import { type MeshOptions, PeerMesh } from '../transport/peer-mesh.js';
import { Lane } from '../transport/shm-lane.js';
import type { PeerAddress } from '../transport/socket-io.js';
import type { FromWorker, OpRequest, OpResult } from './protocol.js';

/**
 * Small collectives run on the main thread itself, on a mesh of their own: for them the
 * two thread hand-offs (main → comm thread → main) cost more than the work, and there is
 * nothing to overlap. Which ops come here is decided by routing.ts, the same way on every
 * rank. The main mesh sends no heartbeats (a main thread busy computing must not look dead;
 * the comm thread's mesh watches liveness).
 */
export class MainRunner {
  readonly mesh: PeerMesh;
  readonly executor: Executor;
  private nextId = 1;
  /** Set as destroyProcessGroup starts: no op may start after it. */
  closed = false;
  private readonly ops = new Map<
    number,
    { resolve: (r: OpResult | undefined) => void; reject: (e: CommError) => void }
  >();

  constructor(opts: MeshOptions, mem: SharedMemory | null) {
    this.mesh = new PeerMesh({ ...opts, heartbeat: false });
    this.executor = new Executor(this.mesh, (m) => this.onDone(m), mem, Lane.Main);
  }

  private onDone(m: FromWorker): void {
    if (m.type !== 'done') return;
    const op = this.ops.get(m.id);
    if (!op) return;
    this.ops.delete(m.id);
    if (m.error) op.reject(deserializeError(m.error));
    else op.resolve(m.result);
  }

  listen(bindHost: string): Promise<PeerAddress> {
    return this.mesh.listen(bindHost);
  }

  connect(addrs: PeerAddress[], timeoutMs: number): Promise<void> {
    return this.mesh.connect(addrs, timeoutMs);
  }

  addGroup(groupId: number, ranks: number[], shm: SharedArrayBuffer | null, hosts: HostLayout | null): void {
    this.executor.addGroup(groupId, ranks, shm, hosts);
  }

  run(req: Omit<OpRequest, 'type' | 'id'>): Promise<OpResult | undefined> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.ops.set(id, { resolve, reject });
      this.executor.submit({ type: 'op', id, ...req });
    });
  }

  close(): Promise<void> {
    this.closed = true;
    const rank = this.mesh.opts.rank;
    const why = `rank ${rank}: the process group was destroyed while this op was running`;
    const err = new NotInitializedError(why, { rank, op: 'destroyProcessGroup' });
    this.executor.closeAll(err);
    for (const op of this.ops.values()) op.reject(err);
    this.ops.clear();
    return this.mesh.close();
  }
}

import { parentPort } from 'node:worker_threads';
import { deserializeError, serializeError } from '../errors.js';
import { Executor } from '../execution/executor.js';
import { PeerMesh } from '../transport/peer-mesh.js';
import { Lane, sharedMemory } from '../transport/shm-lane.js';
import { wireCounterViews } from '../transport/socket-io.js';
import type { FromWorker, ToWorker } from './protocol.js';

/** Entry point of the comm worker thread: owns the peer connections and runs collectives. */
const port = parentPort;
if (!port) throw new Error('comm-worker must run in a worker thread');
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
      executor = new Executor(mesh, post, sharedMemory(), Lane.Comm);
      executor.onPoison = (groupId, err) => post({ type: 'poisoned', groupId, error: serializeError(err) });
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
      executor?.addGroup(msg.groupId, msg.ranks, msg.shm, msg.hosts);
      return;
    case 'op':
      executor?.submit(msg);
      return;
    case 'poison':
      if (msg.announce) executor?.abort(msg.groupId, deserializeError(msg.error));
      else executor?.adoptPoison(msg.groupId, deserializeError(msg.error));
      return;
    case 'close':
      (mesh ? mesh.close() : Promise.resolve()).finally(() => {
        post({ type: 'closed' });
        port.close();
      });
      return;
  }
});

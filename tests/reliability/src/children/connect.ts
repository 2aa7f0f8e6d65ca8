import {
  destroyProcessGroup,
  initProcessGroup,
  type ProcessGroup,
  readLaunchEnv,
  type Store,
  TCPStore,
} from '@ddp/comm';
import { RelayedStore } from '../relayed-store.js';

/**
 * Forms the world of a rank script. With RELAY_CONTROL (host:port of a FaultRelay's
 * control listener) and STORE_FRONT (host:port of its route to the store server) the store
 * and every peer connection pass through the relay; otherwise the world meets as usual.
 */
export async function connectWorld(timeoutMs: number): Promise<{ pg: ProcessGroup; close: () => Promise<void> }> {
  const env = readLaunchEnv();
  const hostPort = (v: string | undefined) => {
    const [host, port] = (v ?? '').split(':');
    return { host: host, port: Number(port) };
  };
  let inner: Store | undefined;
  let store: Store | undefined;
  if (process.env.RELAY_CONTROL) {
    inner = await TCPStore.create({
      ...hostPort(process.env.STORE_FRONT),
      secret: env.secret,
      timeoutMs,
      rank: env.rank,
    });
    store = new RelayedStore(inner, hostPort(process.env.RELAY_CONTROL));
  }
  const pg = await initProcessGroup({ store, rank: env.rank, worldSize: env.worldSize, timeoutMs });
  const within = (p: Promise<unknown>, ms: number) =>
    Promise.race([p.catch(() => {}), new Promise((r) => setTimeout(r, ms).unref())]);
  return {
    pg,
    // a poisoned world may not say goodbye cleanly: do not let that hold the exit
    close: async () => {
      await within(destroyProcessGroup(), 3000);
      if (inner) await within(inner.close(), 1000);
    },
  };
}

import type { Store } from '@ddp/comm';
import { requestRoute, type Target } from './relay.js';

/** Rendezvous keys under which @ddp/comm publishes each rank's listener (peer and main-thread meshes). */
const ADDRESS_KEY = /(?:^|\/)(addr|mainaddr)\/(\d+)$/;

/**
 * A Store that routes a world's peer connections through a FaultRelay: when a rank
 * publishes its listener address, a relay route is opened to it and the route's address
 * is published instead (Unix socket dropped, so peers must dial TCP). Everything else is
 * passed to the inner store unchanged.
 */
export class RelayedStore implements Store {
  constructor(
    private readonly inner: Store,
    private readonly control: Target,
  ) {}

  async set(key: string, value: string | Uint8Array): Promise<void> {
    const m = ADDRESS_KEY.exec(key);
    if (!m) return this.inner.set(key, value);
    const text = typeof value === 'string' ? value : new TextDecoder().decode(value);
    const addr = JSON.parse(text) as Target & { uds: string | null };
    const front = await requestRoute(
      this.control,
      { host: addr.host, port: addr.port },
      `${m[1] === 'addr' ? 'peer' : 'main'}:${m[2]}`,
    );
    return this.inner.set(key, JSON.stringify({ ...addr, ...front, uds: null }));
  }

  get(key: string): Promise<Uint8Array> {
    return this.inner.get(key);
  }
  add(key: string, amount: number): Promise<number> {
    return this.inner.add(key, amount);
  }
  compareSet(key: string, expected: string | Uint8Array, desired: string | Uint8Array): Promise<Uint8Array> {
    return this.inner.compareSet(key, expected, desired);
  }
  wait(keys: string[], timeoutMs?: number): Promise<void> {
    return this.inner.wait(keys, timeoutMs);
  }
  deleteKey(key: string): Promise<boolean> {
    return this.inner.deleteKey(key);
  }
  numKeys(): Promise<number> {
    return this.inner.numKeys();
  }
  check(keys: string[]): Promise<boolean> {
    return this.inner.check(keys);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

import type { Store } from './store.js';

/** Namespaces every key of an underlying store with `prefix/` (PyTorch's PrefixStore). */
export class PrefixStore implements Store {
  constructor(
    readonly prefix: string,
    readonly base: Store,
  ) {}

  private k(key: string): string {
    return `${this.prefix}/${key}`;
  }

  set(key: string, value: string | Uint8Array): Promise<void> {
    return this.base.set(this.k(key), value);
  }
  get(key: string): Promise<Uint8Array> {
    return this.base.get(this.k(key));
  }
  add(key: string, amount: number): Promise<number> {
    return this.base.add(this.k(key), amount);
  }
  compareSet(key: string, expected: string | Uint8Array, desired: string | Uint8Array): Promise<Uint8Array> {
    return this.base.compareSet(this.k(key), expected, desired);
  }
  wait(keys: string[], timeoutMs?: number): Promise<void> {
    return this.base.wait(
      keys.map((key) => this.k(key)),
      timeoutMs,
    );
  }
  deleteKey(key: string): Promise<boolean> {
    return this.base.deleteKey(this.k(key));
  }
  /** Counts the whole underlying store's keys, as PyTorch does. */
  numKeys(): Promise<number> {
    return this.base.numKeys();
  }
  check(keys: string[]): Promise<boolean> {
    return this.base.check(keys.map((key) => this.k(key)));
  }
  /** The base store is shared; closing a prefix view leaves it open. */
  async close(): Promise<void> {}
}

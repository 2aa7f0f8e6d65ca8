import { InvalidArgumentError } from '../errors.js';
import { bytesEqual, checkAmount } from './store.js';

/**
 * The data and waiting logic shared by HashStore and the TCPStore server: a map of byte
 * values plus callbacks waiting for keys to appear.
 */
export class KeyValueTable {
  private readonly data = new Map<string, Uint8Array>();
  private waiters: { keys: string[]; done: () => void }[] = [];

  has(key: string): boolean {
    return this.data.has(key);
  }

  getNow(key: string): Uint8Array | undefined {
    return this.data.get(key);
  }

  set(key: string, value: Uint8Array): void {
    this.data.set(key, value);
    this.wake();
  }

  add(key: string, amount: number): number {
    const cur = this.data.get(key);
    const text = cur ? new TextDecoder().decode(cur) : '0';
    const n = Number(text);
    if (!Number.isSafeInteger(n))
      throw new InvalidArgumentError(`store key ${key} holds ${JSON.stringify(text)}, not an integer`, { op: 'add' });
    const next = n + checkAmount(amount);
    if (!Number.isSafeInteger(next))
      throw new InvalidArgumentError(`store key ${key}: ${n} + ${amount} is past a safe integer`, { op: 'add' });
    this.set(key, new TextEncoder().encode(String(next)));
    return next;
  }

  compareSet(key: string, expected: Uint8Array, desired: Uint8Array): Uint8Array {
    const cur = this.data.get(key);
    if ((cur === undefined && expected.length === 0) || (cur !== undefined && bytesEqual(cur, expected))) {
      this.set(key, desired);
      return desired;
    }
    return cur ?? expected;
  }

  delete(key: string): boolean {
    return this.data.delete(key);
  }

  get size(): number {
    return this.data.size;
  }

  /** Calls done once every key exists; returns a cancel function. */
  whenPresent(keys: string[], done: () => void): () => void {
    if (keys.every((k) => this.data.has(k))) {
      done();
      return () => {};
    }
    const w = { keys, done };
    this.waiters.push(w);
    return () => {
      this.waiters = this.waiters.filter((x) => x !== w);
    };
  }

  private wake(): void {
    const ready = this.waiters.filter((w) => w.keys.every((k) => this.data.has(k)));
    if (ready.length === 0) return;
    this.waiters = this.waiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.done();
  }
}

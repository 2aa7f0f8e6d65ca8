import { InvalidArgumentError } from '../errors.js';

/**
 * A key-value store shared by all ranks, used for rendezvous (PyTorch's c10d::Store).
 * Values are bytes; strings are stored as UTF-8.
 */
export interface Store {
  set(key: string, value: string | Uint8Array): Promise<void>;
  /** Waits (up to the store's timeout) until the key exists, then returns its value. */
  get(key: string): Promise<Uint8Array>;
  /** Adds to an integer counter (missing = 0) and returns the new value. */
  add(key: string, amount: number): Promise<number>;
  /**
   * Sets key to desired if its current value equals expected (an empty expected matches a
   * missing key); returns the value after the operation.
   */
  compareSet(key: string, expected: string | Uint8Array, desired: string | Uint8Array): Promise<Uint8Array>;
  /** Waits until every key exists; CommTimeoutError after timeoutMs (default: the store's). */
  wait(keys: string[], timeoutMs?: number): Promise<void>;
  /** True when the key existed. */
  deleteKey(key: string): Promise<boolean>;
  numKeys(): Promise<number>;
  /** True when every key exists (does not wait). */
  check(keys: string[]): Promise<boolean>;
  close(): Promise<void>;
}

export const DEFAULT_STORE_TIMEOUT_MS = 300_000;

/**
 * A key must be well-formed UTF-16 (String.prototype.isWellFormed): a TCPStore sends keys as
 * UTF-8, where every lone surrogate becomes U+FFFD, so '\ud800' and '\udc00' would be one key.
 * Every store refuses them, so code that works on a HashStore works on a TCPStore. Returns it.
 */
export function checkKey(key: string): string {
  // isWellFormed is ES2024: Node 20 has it, this package's TypeScript lib does not
  if (typeof key !== 'string' || !(key as string & { isWellFormed(): boolean }).isWellFormed())
    throw new InvalidArgumentError(`store key ${JSON.stringify(key)} is not well-formed UTF-16 (a lone surrogate)`, {
      op: 'store',
    });
  return key;
}

/**
 * add's amount: a safe integer, as torch's int64 (a fraction, NaN or a rounded huge number would
 * leave the key holding no integer, and every later add on it failing). Returns it.
 */
export function checkAmount(amount: number): number {
  if (!Number.isSafeInteger(amount))
    throw new InvalidArgumentError(`store add: the amount must be a safe integer, got ${amount}`, { op: 'add' });
  return amount;
}

export function toBytes(v: string | Uint8Array): Uint8Array {
  return typeof v === 'string' ? new TextEncoder().encode(v) : v;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Decodes a store value written as a string. */
export function decodeText(v: Uint8Array): string {
  return new TextDecoder().decode(v);
}

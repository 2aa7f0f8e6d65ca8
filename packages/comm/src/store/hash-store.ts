import { CommTimeoutError } from '../errors.js';
import { startTimer } from '../timer.js';
import { KeyValueTable } from './key-value.js';
import { checkKey, DEFAULT_STORE_TIMEOUT_MS, type Store, toBytes } from './store.js';

/** In-process store (PyTorch's HashStore): for tests and single-process worlds. */
export class HashStore implements Store {
  private readonly table = new KeyValueTable();
  constructor(private readonly timeoutMs = DEFAULT_STORE_TIMEOUT_MS) {}

  async set(key: string, value: string | Uint8Array): Promise<void> {
    this.table.set(checkKey(key), copyOf(toBytes(value)));
  }

  async get(key: string): Promise<Uint8Array> {
    await this.wait([key]);
    return copyOf(this.table.getNow(key) as Uint8Array);
  }

  async add(key: string, amount: number): Promise<number> {
    return this.table.add(checkKey(key), amount);
  }

  async compareSet(key: string, expected: string | Uint8Array, desired: string | Uint8Array): Promise<Uint8Array> {
    return copyOf(this.table.compareSet(checkKey(key), toBytes(expected), copyOf(toBytes(desired))));
  }

  wait(keys: string[], timeoutMs = this.timeoutMs): Promise<void> {
    return new Promise((resolve, reject) => {
      keys.forEach(checkKey);
      let stopTimer = () => {};
      const cancel = this.table.whenPresent(keys, () => {
        stopTimer();
        resolve();
      });
      stopTimer = startTimer(() => {
        cancel();
        const missing = keys.filter((k) => !this.table.has(k));
        reject(
          new CommTimeoutError(`store wait timed out after ${timeoutMs} ms for keys ${missing.join(', ')}`, {
            op: 'store.wait',
          }),
        );
      }, timeoutMs);
      if (keys.every((k) => this.table.has(k))) stopTimer();
    });
  }

  async deleteKey(key: string): Promise<boolean> {
    return this.table.delete(checkKey(key));
  }

  async numKeys(): Promise<number> {
    return this.table.size;
  }

  async check(keys: string[]): Promise<boolean> {
    return keys.every((k) => this.table.has(checkKey(k)));
  }

  async close(): Promise<void> {}
}

/** A copy: `slice()` on a Node Buffer is a view, so a stored value changed with the caller's buffer. */
const copyOf = (bytes: Uint8Array) => new Uint8Array(bytes);

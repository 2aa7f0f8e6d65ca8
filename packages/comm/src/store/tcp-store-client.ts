import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AuthError,
  CommError,
  CommTimeoutError,
  EarlierAttemptError,
  InvalidArgumentError,
  PeerLostError,
  ProtocolError,
  RunMismatchError,
} from '../errors.js';
import { DEFAULT_RUN_ID } from '../rendezvous/env.js';
import { startTimer } from '../timer.js';
import { ByteQueue } from '../transport/byte-queue.js';
import { clientHandshake, Purpose } from '../transport/handshake.js';
import { checkAmount, DEFAULT_STORE_TIMEOUT_MS, type Store, toBytes } from './store.js';
import { BodyReader, BodyWriter, StoreCmd, StoreReply, takeBodies } from './tcp-store-codec.js';
import { TCPStoreServer } from './tcp-store-server.js';

export interface TCPStoreOptions {
  host: string;
  port: number;
  /** The run's secret (DDP_SECRET); the server refuses clients that do not know it. */
  secret: string;
  /** The run's id (DDP_RUN_ID): the store and its clients refuse each other across runs (default: DEFAULT_RUN_ID). */
  runId?: string;
  /** Start the server in this process (rank 0). */
  isServer?: boolean;
  /** Timeout of get/wait and of connecting. */
  timeoutMs?: number;
  /** Rank of this client, for error messages. */
  rank?: number;
  /** With isServer: called for each connection the server refuses (a client of another run, a wrong secret). */
  onConnectionError?: (err: CommError) => void;
}

interface Pending {
  resolve: (r: BodyReader) => void;
  reject: (e: Error) => void;
  /** Cancels the request's timeout. */
  stopTimer?: () => void;
}

/** Client of a TCPStoreServer (and, with isServer, its host): PyTorch's TCPStore. */
export class TCPStore implements Store {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closed = false;
  private failure: CommError | null = null;

  private constructor(
    private readonly socket: Socket,
    readonly server: TCPStoreServer | null,
    private readonly timeoutMs: number,
    private readonly rank: number,
  ) {}

  /** Local address of the connection to the store: this host's address on the route to it. */
  get localAddress(): string {
    return this.socket.localAddress ?? '127.0.0.1';
  }

  get port(): number {
    return this.socket.remotePort ?? 0;
  }

  static async create(opts: TCPStoreOptions): Promise<TCPStore> {
    const timeoutMs = opts.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
    const rank = opts.rank ?? -1;
    if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) {
      const what = `TCPStore.create: port must be an integer in [0, 65535], got ${opts.port}`;
      throw new InvalidArgumentError(what, { rank, op: 'store.connect' });
    }
    const runId = opts.runId ?? DEFAULT_RUN_ID;
    const { host, secret, onConnectionError } = opts;
    const listen = { host, port: opts.port, secret, runId, onConnectionError };
    const server = opts.isServer ? await TCPStoreServer.listen(listen) : null;
    const port = server ? server.port : opts.port;
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      const sock = await tryConnect(opts.host, port).catch((e: Error) => e);
      if (!(sock instanceof Error)) {
        try {
          const what = `rank ${rank}: store client of ${opts.host}:${port}`;
          const hello = { secret, runId, purpose: Purpose.Store, rank, timeoutMs: Math.min(10_000, timeoutMs), what };
          const { leftover } = await clientHandshake(sock, hello);
          const store = new TCPStore(sock, server, timeoutMs, rank);
          store.attach(leftover);
          return store;
        } catch (e) {
          // another run's store, or one that does not know the secret, will not change its mind; an
          // earlier attempt's goes when its rank 0 exits, and this attempt's takes the port
          const permanent =
            e instanceof AuthError || (e instanceof RunMismatchError && !(e instanceof EarlierAttemptError));
          if (permanent || Date.now() > deadline) {
            await server?.close();
            throw e;
          }
        }
      } else if (Date.now() > deadline) {
        await server?.close();
        // rank 0 hosts no store when it believes it is a world of one (WORLD_SIZE=1)
        const hint = 'is rank 0 running, with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE?';
        const where = `${opts.host}:${port}`;
        const why = `could not reach the store at ${where} within ${timeoutMs} ms (${sock.message}; ${hint})`;
        throw new CommTimeoutError(`rank ${rank}: ${why}`, { rank, op: 'store.connect' });
      }
      await sleep(Math.min(50 * 2 ** attempt, 500));
    }
  }

  private attach(leftover: Buffer[]): void {
    const q = new ByteQueue();
    const onData = (chunk: Buffer) => {
      q.push(chunk);
      try {
        for (const body of takeBodies(q)) this.onReply(new BodyReader(body));
      } catch (e) {
        this.fail(e instanceof CommError ? e : new ProtocolError(String(e), { op: 'store' }));
      }
    };
    for (const c of leftover) onData(c);
    this.socket.on('data', onData);
    this.socket.on('error', () => {});
    this.socket.on('close', () => {
      if (!this.closed)
        this.fail(
          new PeerLostError(`rank ${this.rank}: the store connection closed (is rank 0 alive?)`, {
            rank: this.rank,
            ranks: [0],
            op: 'store',
          }),
        );
    });
  }

  private onReply(r: BodyReader): void {
    const id = r.u32();
    const status = r.u8();
    const p = this.pending.get(id);
    if (!p) return; // the caller timed out already
    this.pending.delete(id);
    p.stopTimer?.();
    if (status === StoreReply.Ok) {
      p.resolve(r);
      return;
    }
    // the server refused this request and goes on serving (StoreReply)
    const Cls = status === StoreReply.Refused ? InvalidArgumentError : ProtocolError;
    p.reject(new Cls(`store: ${Buffer.from(r.bytes()).toString('utf8')}`, { op: 'store', rank: this.rank }));
  }

  private fail(e: CommError): void {
    this.failure ??= e;
    for (const p of this.pending.values()) {
      p.stopTimer?.();
      p.reject(e);
    }
    this.pending.clear();
    this.socket.destroy();
  }

  private request(cmd: StoreCmd, fill: (w: BodyWriter) => void, what: string, timeoutMs?: number): Promise<BodyReader> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.closed) return Promise.reject(new CommError(`store is closed (${what})`, { op: what }));
    const id = this.nextId++;
    let frame: Buffer;
    try {
      const w = new BodyWriter().u32(id).u8(cmd);
      fill(w);
      frame = w.frame();
    } catch (e) {
      // refused before sending (a key or value over the limits): the connection stays usable
      const op = `store.${what.replace(/\(.*$/s, '')}`;
      const why = `rank ${this.rank}: ${op}: ${(e as Error).message}`;
      return Promise.reject(new InvalidArgumentError(why, { rank: this.rank, op, cause: e }));
    }
    return new Promise((resolve, reject) => {
      const p: Pending = { resolve, reject };
      if (timeoutMs !== undefined) {
        p.stopTimer = startTimer(() => {
          this.pending.delete(id);
          reject(
            new CommTimeoutError(`rank ${this.rank}: store ${what} timed out after ${timeoutMs} ms`, {
              rank: this.rank,
              op: `store.${what}`,
            }),
          );
        }, timeoutMs);
      }
      this.pending.set(id, p);
      this.socket.write(frame);
    });
  }

  async set(key: string, value: string | Uint8Array): Promise<void> {
    await this.request(StoreCmd.Set, (w) => w.key(key).value(toBytes(value)), 'set');
  }
  async get(key: string): Promise<Uint8Array> {
    return (await this.request(StoreCmd.Get, (w) => w.key(key), `get(${key})`, this.timeoutMs)).bytes();
  }
  async add(key: string, amount: number): Promise<number> {
    return (await this.request(StoreCmd.Add, (w) => w.key(key).f64(checkAmount(amount)), 'add')).f64();
  }
  async compareSet(key: string, expected: string | Uint8Array, desired: string | Uint8Array): Promise<Uint8Array> {
    return (
      await this.request(
        StoreCmd.CompareSet,
        (w) => w.key(key).value(toBytes(expected)).value(toBytes(desired)),
        'compareSet',
      )
    ).bytes();
  }
  async wait(keys: string[], timeoutMs = this.timeoutMs): Promise<void> {
    await this.request(
      StoreCmd.Wait,
      (w) => {
        w.u32(keys.length);
        for (const k of keys) w.key(k);
      },
      `wait(${keys.join(', ')})`,
      timeoutMs,
    );
  }
  async deleteKey(key: string): Promise<boolean> {
    return (await this.request(StoreCmd.Delete, (w) => w.key(key), 'deleteKey')).u8() === 1;
  }
  async numKeys(): Promise<number> {
    return (await this.request(StoreCmd.NumKeys, () => {}, 'numKeys')).f64();
  }
  async check(keys: string[]): Promise<boolean> {
    const r = await this.request(
      StoreCmd.Check,
      (w) => {
        w.u32(keys.length);
        for (const k of keys) w.key(k);
      },
      'check',
    );
    return r.u8() === 1;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.fail(new CommError('store closed', { op: 'store.close' }));
    await this.server?.close();
  }
}

function tryConnect(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host, port });
    s.once('connect', () => {
      s.off('error', reject);
      s.setNoDelay(true);
      resolve(s);
    });
    s.once('error', reject);
  });
}

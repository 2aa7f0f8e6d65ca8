import { createServer, type Server, type Socket } from 'node:net';
import { AddressInUseError, CommError, InvalidArgumentError, ProtocolError } from '../errors.js';
import { DEFAULT_RUN_ID } from '../rendezvous/env.js';
import { ByteQueue } from '../transport/byte-queue.js';
import { Purpose, serverHandshake } from '../transport/handshake.js';
import { KeyValueTable } from './key-value.js';
import { toBytes } from './store.js';
import { BodyReader, BodyWriter, StoreCmd, StoreReply, takeBodies } from './tcp-store-codec.js';

export interface TCPStoreServerOptions {
  /** Address to bind; the server listens on this address only. */
  host: string;
  /** 0 picks a free port. */
  port: number;
  secret: string;
  /** The run's id (DDP_RUN_ID): clients of another run are refused (default: DEFAULT_RUN_ID). */
  runId?: string;
  /** Called for each refused or broken connection (never throws to the caller). */
  onConnectionError?: (err: CommError) => void;
}

/**
 * The key a server sets to the run id of a later attempt of its run that knocked (its launcher
 * restarted), so the ranks still meeting in this attempt end it and restart too.
 */
export const LATER_ATTEMPT_KEY = 'ddp/later_attempt';

/** The TCPStore server (rank 0 hosts it): a KeyValueTable served to authenticated clients. */
export class TCPStoreServer {
  private readonly table = new KeyValueTable();
  private readonly sockets = new Set<Socket>();
  private server: Server | null = null;
  port = 0;

  private constructor(private readonly opts: TCPStoreServerOptions) {}

  static async listen(opts: TCPStoreServerOptions): Promise<TCPStoreServer> {
    const s = new TCPStoreServer(opts);
    await s.start();
    return s;
  }

  private start(): Promise<void> {
    const server = createServer((sock) => this.accept(sock));
    this.server = server;
    const { host, port } = this.opts;
    return new Promise((resolve, reject) => {
      server.once('error', (e: NodeJS.ErrnoException) => {
        const where = `${host}:${port}`;
        // a MASTER_ADDR of another host or no host: rank 0 hosts the store there (was a plain Node error)
        if (e.code === 'EADDRNOTAVAIL' || e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN')
          return reject(
            new InvalidArgumentError(
              `store: cannot listen on ${where} (${e.code}): MASTER_ADDR must be an address or name of rank 0's ` +
                'own host, where it hosts the store',
              { op: 'store.listen' },
            ),
          );
        if (e.code !== 'EADDRINUSE') return reject(e);
        const why = `port ${port} is in use (another run's store? pick another MASTER_PORT)`;
        reject(new AddressInUseError(`store: cannot listen on ${where}: ${why}`, { op: 'store.listen' }));
      });
      server.listen({ host, port, exclusive: true }, () => {
        server.removeAllListeners('error');
        server.on('error', (e) => this.report(new CommError(`store server: ${e.message}`, { op: 'store' })));
        const addr = server.address();
        this.port = typeof addr === 'object' && addr ? addr.port : port;
        resolve();
      });
    });
  }

  private report(err: CommError): void {
    this.opts.onConnectionError?.(err);
  }

  private async accept(sock: Socket): Promise<void> {
    this.sockets.add(sock);
    sock.setNoDelay(true);
    sock.on('close', () => this.sockets.delete(sock));
    sock.on('error', () => {});
    let leftover: Buffer[];
    try {
      ({ leftover } = await serverHandshake(sock, {
        secret: this.opts.secret,
        runId: this.opts.runId ?? DEFAULT_RUN_ID,
        purpose: Purpose.Store,
        timeoutMs: 10_000,
        what: `store server on port ${this.port}`,
        onLaterAttempt: (runId) => this.table.set(LATER_ATTEMPT_KEY, toBytes(runId)),
      }));
    } catch (e) {
      this.report(e instanceof CommError ? e : new CommError(String(e)));
      return;
    }
    const q = new ByteQueue();
    const cancels = new Set<() => void>();
    const onData = (chunk: Buffer) => {
      q.push(chunk);
      try {
        for (const body of takeBodies(q)) this.handle(sock, body, cancels);
      } catch (e) {
        const err = e instanceof CommError ? e : new ProtocolError(String(e), { op: 'store' });
        this.report(err);
        sock.destroy();
      }
    };
    sock.on('close', () => {
      for (const c of cancels) c();
    });
    for (const c of leftover) onData(c);
    sock.on('data', onData);
  }

  /**
   * Serves one request. One that does not parse past its id (a field over the limits, an
   * unknown command) gets an error reply, and the connection goes on: its framing is intact.
   */
  private handle(sock: Socket, body: Buffer, cancels: Set<() => void>): void {
    const r = new BodyReader(body);
    const id = r.u32();
    try {
      this.serve(sock, r, id, cancels);
    } catch (e) {
      if (!(e instanceof ProtocolError)) throw e;
      this.report(e);
      refuse(sock, id, StoreReply.Malformed, e.message);
    }
  }

  private serve(sock: Socket, r: BodyReader, id: number, cancels: Set<() => void>): void {
    const cmd = r.u8();
    const reply = (fill: (w: BodyWriter) => void) => {
      const w = new BodyWriter().u32(id).u8(0);
      fill(w);
      if (!sock.destroyed) sock.write(w.frame());
    };
    const t = this.table;
    switch (cmd) {
      case StoreCmd.Set: {
        const key = r.key();
        const value = r.bytes();
        r.end();
        t.set(key, value);
        reply(() => {});
        return;
      }
      case StoreCmd.Get:
      case StoreCmd.Wait: {
        const keys = cmd === StoreCmd.Get ? [r.key()] : r.keys();
        r.end();
        let answered = false;
        let cancel = () => {};
        cancel = t.whenPresent(keys, () => {
          answered = true;
          cancels.delete(cancel);
          reply((w) => {
            if (cmd === StoreCmd.Get) w.bytes(t.getNow(keys[0]) as Uint8Array);
          });
        });
        if (!answered) cancels.add(cancel);
        return;
      }
      case StoreCmd.Add: {
        const key = r.key();
        const amount = r.f64();
        r.end();
        let next: number;
        try {
          next = t.add(key, amount);
        } catch (e) {
          refuse(sock, id, StoreReply.Refused, (e as Error).message);
          return;
        }
        reply((w) => w.f64(next));
        return;
      }
      case StoreCmd.CompareSet: {
        const key = r.key();
        const expected = r.bytes();
        const desired = r.bytes();
        r.end();
        const v = t.compareSet(key, expected, desired);
        reply((w) => w.bytes(v));
        return;
      }
      case StoreCmd.Delete: {
        const key = r.key();
        r.end();
        const had = t.delete(key);
        reply((w) => w.u8(had ? 1 : 0));
        return;
      }
      case StoreCmd.NumKeys:
        r.end();
        reply((w) => w.f64(t.size));
        return;
      case StoreCmd.Check: {
        const keys = r.keys();
        r.end();
        reply((w) => w.u8(keys.every((k) => t.has(k)) ? 1 : 0));
        return;
      }
      default:
        throw new ProtocolError(`store server: unknown command ${cmd}`, { op: 'store' });
    }
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** An error reply: the request `id` failed with `message`. */
function refuse(sock: Socket, id: number, status: StoreReply, message: string): void {
  if (!sock.destroyed) sock.write(new BodyWriter().u32(id).u8(status).str(message).frame());
}

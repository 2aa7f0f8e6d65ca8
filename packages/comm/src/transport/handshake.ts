import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Socket } from 'node:net';
import { AuthError, CommTimeoutError, ProtocolError } from '../errors.js';
import { ByteQueue } from './byte-queue.js';

/**
 * Mutual HMAC-SHA256 challenge-response, run on every new connection (store and peer)
 * before any other byte is trusted. Neither side ever sends the secret itself.
 *
 *   client → server  HELLO  "DDPH" v purpose rank:i32 nonceC[16]            (26 bytes)
 *   server → client  "DDPS" nonceS[16] HMAC(secret, "S"|purpose|nonceC|nonceS) (52 bytes)
 *   client → server  HMAC(secret, "C"|purpose|rank|nonceS|nonceC)           (32 bytes)
 *   server → client  1 byte: 1 = accepted, 0 = refused
 */
export enum Purpose {
  Store = 1,
  Peer = 2,
}

const VERSION = 1;
const HELLO_LEN = 26;
const CHALLENGE_LEN = 52;
const MAC_LEN = 32;

/** Result of a successful handshake: the peer's claimed rank and bytes already read past it. */
export interface Handshaken {
  peerRank: number;
  leftover: Buffer[];
}

function mac(secret: string, parts: (Buffer | Uint8Array)[]): Buffer {
  const h = createHmac('sha256', secret);
  for (const p of parts) h.update(p);
  return h.digest();
}

/** Subscribes to a socket's incoming bytes; returns the unsubscribe function. */
export type ByteSource = (onBytes: (chunk: Uint8Array) => void) => () => void;

function dataEvents(socket: Socket): ByteSource {
  return (fn) => {
    socket.on('data', fn);
    return () => socket.off('data', fn);
  };
}

/** Reads exact byte counts from a socket until detached; rejects on close or timeout. */
class Reader {
  private q = new ByteQueue();
  private want: { n: number; resolve: (b: Uint8Array) => void; reject: (e: Error) => void } | null = null;
  private failure: Error | null = null;
  private timer: NodeJS.Timeout;
  private readonly onData = (c: Uint8Array) => {
    // copied: an onread source reuses its buffer
    this.q.push(Buffer.from(c));
    this.pump();
  };
  private unsubscribe: () => void;
  private readonly onEnd = () => this.fail(new ProtocolError(`${this.what}: connection closed during handshake`, { op: 'handshake' }));
  private readonly onError = (e: Error) => this.fail(new ProtocolError(`${this.what}: ${e.message}`, { op: 'handshake' }));

  constructor(private readonly socket: Socket, private readonly what: string, timeoutMs: number, source?: ByteSource) {
    this.unsubscribe = (source ?? dataEvents(socket))(this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onEnd);
    socket.on('error', this.onError);
    this.timer = setTimeout(
      () => this.fail(new CommTimeoutError(`${what}: handshake timed out after ${timeoutMs} ms`, { op: 'handshake' })),
      timeoutMs,
    );
  }

  read(n: number): Promise<Uint8Array> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.want = { n, resolve, reject };
      this.pump();
    });
  }

  private pump(): void {
    if (this.want && this.q.length >= this.want.n) {
      const w = this.want;
      this.want = null;
      w.resolve(this.q.take(w.n));
    }
  }

  fail(e: Error): void {
    if (this.failure) return;
    this.failure = e;
    this.want?.reject(e);
    this.want = null;
  }

  detach(): Buffer[] {
    clearTimeout(this.timer);
    this.unsubscribe();
    this.socket.off('end', this.onEnd);
    this.socket.off('close', this.onEnd);
    this.socket.off('error', this.onError);
    return this.q.drain();
  }
}

/** Client side: proves the secret and checks that the server knows it too. */
export async function clientHandshake(
  socket: Socket,
  opts: { secret: string; purpose: Purpose; rank: number; timeoutMs: number; what: string; source?: ByteSource },
): Promise<Handshaken> {
  const reader = new Reader(socket, opts.what, opts.timeoutMs, opts.source);
  try {
    const nonceC = randomBytes(16);
    const hello = Buffer.alloc(HELLO_LEN);
    hello.write('DDPH', 0, 'latin1');
    hello[4] = VERSION;
    hello[5] = opts.purpose;
    hello.writeInt32LE(opts.rank, 6);
    nonceC.copy(hello, 10);
    socket.write(hello);
    const ch = Buffer.from(await reader.read(CHALLENGE_LEN));
    if (ch.toString('latin1', 0, 4) !== 'DDPS') throw new ProtocolError(`${opts.what}: not a ddp server (bad magic)`, { op: 'handshake' });
    const nonceS = ch.subarray(4, 20);
    const purposeByte = Buffer.from([opts.purpose]);
    const expected = mac(opts.secret, [Buffer.from('S'), purposeByte, nonceC, nonceS]);
    if (!timingSafeEqual(expected, ch.subarray(20, 52))) {
      throw new AuthError(`${opts.what}: the server does not know this run's secret (DDP_SECRET differs)`, { op: 'handshake', rank: opts.rank });
    }
    const rankBuf = Buffer.alloc(4);
    rankBuf.writeInt32LE(opts.rank);
    socket.write(mac(opts.secret, [Buffer.from('C'), purposeByte, rankBuf, nonceS, nonceC]));
    const verdict = await reader.read(1);
    if (verdict[0] !== 1) {
      throw new AuthError(`${opts.what}: refused by the server (wrong secret)`, { op: 'handshake', rank: opts.rank });
    }
    return { peerRank: -1, leftover: reader.detach() };
  } catch (e) {
    reader.detach();
    socket.destroy();
    throw e;
  }
}

/** Server side: challenges the client; refuses (and closes) on a wrong proof or garbage. */
export async function serverHandshake(
  socket: Socket,
  opts: { secret: string; purpose: Purpose; timeoutMs: number; what: string; maxRank?: number },
): Promise<Handshaken> {
  const reader = new Reader(socket, opts.what, opts.timeoutMs);
  try {
    const hello = Buffer.from(await reader.read(HELLO_LEN));
    if (hello.toString('latin1', 0, 4) !== 'DDPH' || hello[4] !== VERSION) {
      throw new ProtocolError(`${opts.what}: not a ddp client (bad magic or version)`, { op: 'handshake' });
    }
    if (hello[5] !== opts.purpose) throw new ProtocolError(`${opts.what}: wrong purpose ${hello[5]}`, { op: 'handshake' });
    const rank = hello.readInt32LE(6);
    if (rank < -1 || (opts.maxRank !== undefined && rank > opts.maxRank)) {
      throw new ProtocolError(`${opts.what}: client claims out-of-range rank ${rank}`, { op: 'handshake' });
    }
    const nonceC = hello.subarray(10, 26);
    const nonceS = randomBytes(16);
    const purposeByte = Buffer.from([opts.purpose]);
    socket.write(Buffer.concat([Buffer.from('DDPS', 'latin1'), nonceS, mac(opts.secret, [Buffer.from('S'), purposeByte, nonceC, nonceS])]));
    const proof = Buffer.from(await reader.read(MAC_LEN));
    const expected = mac(opts.secret, [Buffer.from('C'), purposeByte, hello.subarray(6, 10), nonceS, nonceC]);
    if (!timingSafeEqual(expected, proof)) {
      socket.end(Buffer.from([0]));
      throw new AuthError(`${opts.what}: refused a client claiming rank ${rank}: wrong secret`, { op: 'handshake', ranks: [rank] });
    }
    socket.write(Buffer.from([1]));
    return { peerRank: rank, leftover: reader.detach() };
  } catch (e) {
    reader.detach();
    if (!socket.writableEnded) socket.destroy();
    socket.on('error', () => {});
    throw e;
  }
}

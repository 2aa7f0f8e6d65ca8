import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Socket } from 'node:net';
import { AuthError, CommTimeoutError, EarlierAttemptError, ProtocolError, RunMismatchError } from '../errors.js';
import { isEarlierAttempt } from '../rendezvous/env.js';
import { startTimer } from '../timer.js';
import { ByteQueue } from './byte-queue.js';

/**
 * Mutual HMAC-SHA256 challenge-response, run on every new connection (store and peer)
 * before any other byte is trusted. Neither side ever sends the secret itself. Both sides
 * also name their run (DDP_RUN_ID): a server of another run refuses with its own id, so two
 * worlds that share a port and a secret fail with RunMismatchError instead of mixing. A client
 * of a later attempt of the server's run (its launcher restarted) is challenged without the
 * server's proof ("DDPL": a proof for a run id the server is not of would serve anyone who asks),
 * proves the secret for its own run id and is refused with verdict 2: the server may believe it,
 * and end its attempt.
 *
 *   client → server  HELLO  "DDPH" v purpose rank:i32 nonceC[16] idLen:u8 runId   (27 + idLen bytes)
 *   server → client  "DDPS" nonceS[16] HMAC(secret, "S"|purpose|runId|nonceC|nonceS) (52 bytes)
 *               or   "DDPL" nonceS[16]: a later attempt of the server's run        (20 bytes)
 *               or   "DDPX" idLen:u8 runId: another run, connection closed
 *   client → server  HMAC(secret, "C"|purpose|rank|runId|nonceS|nonceC)            (32 bytes)
 *   server → client  1 byte: 1 = accepted, 0 = refused, 2 = the server is an earlier attempt (closed)
 */
export enum Purpose {
  Store = 1,
  Peer = 2,
}

const VERSION = 3;
/** The fixed part of HELLO, up to and including the run id's length byte. */
const HELLO_LEN = 27;
const MAGIC_LEN = 4;
const CHALLENGE_LEN = 52;
const MAC_LEN = 32;
const NONCE_LEN = 16;
const ACCEPTED = 1;
const EARLIER_ATTEMPT = 2;

/** A run id as sent: one length byte, then its UTF-8 bytes. */
function encodeRunId(runId: string): Buffer {
  const bytes = Buffer.from(runId, 'utf8');
  if (bytes.length > 255) throw new ProtocolError(`run id of ${bytes.length} bytes exceeds 255`, { op: 'handshake' });
  return Buffer.concat([Buffer.from([bytes.length]), bytes]);
}

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
  private readonly stopTimer: () => void;
  private readonly onData = (c: Uint8Array) => {
    // copied: an onread source reuses its buffer
    this.q.push(Buffer.from(c));
    this.pump();
  };
  private unsubscribe: () => void;
  private readonly onEnd = () =>
    this.fail(new ProtocolError(`${this.what}: connection closed during handshake`, { op: 'handshake' }));
  private readonly onError = (e: Error) =>
    this.fail(new ProtocolError(`${this.what}: ${e.message}`, { op: 'handshake' }));

  constructor(
    private readonly socket: Socket,
    private readonly what: string,
    timeoutMs: number,
    source?: ByteSource,
  ) {
    this.unsubscribe = (source ?? dataEvents(socket))(this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onEnd);
    socket.on('error', this.onError);
    this.stopTimer = startTimer(
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
    this.stopTimer();
    this.unsubscribe();
    this.socket.off('end', this.onEnd);
    this.socket.off('close', this.onEnd);
    this.socket.off('error', this.onError);
    return this.q.drain();
  }
}

/** Client side: proves the secret and checks that the server knows it too and is of the same run. */
export async function clientHandshake(
  socket: Socket,
  opts: {
    secret: string;
    runId: string;
    purpose: Purpose;
    rank: number;
    timeoutMs: number;
    what: string;
    source?: ByteSource;
  },
): Promise<Handshaken> {
  const reader = new Reader(socket, opts.what, opts.timeoutMs, opts.source);
  try {
    const nonceC = randomBytes(16);
    const runId = encodeRunId(opts.runId);
    const hello = Buffer.alloc(HELLO_LEN - 1); // runId brings the length byte
    hello.write('DDPH', 0, 'latin1');
    hello[4] = VERSION;
    hello[5] = opts.purpose;
    hello.writeInt32LE(opts.rank, 6);
    nonceC.copy(hello, 10);
    socket.write(Buffer.concat([hello, runId]));
    const magic = Buffer.from(await reader.read(MAGIC_LEN)).toString('latin1');
    if (magic === 'DDPX') {
      const theirs = Buffer.from(await reader.read((await reader.read(1))[0])).toString('utf8');
      const runs = `the other side belongs to run "${theirs}", this rank to run "${opts.runId}"`;
      throw new RunMismatchError(`${opts.what}: ${runs} (two worlds on one MASTER_PORT?)`, {
        op: 'handshake',
        rank: opts.rank,
      });
    }
    if (magic !== 'DDPS' && magic !== 'DDPL')
      throw new ProtocolError(`${opts.what}: not a ddp server (bad magic)`, { op: 'handshake' });
    const laterThanServer = magic === 'DDPL';
    const ch = Buffer.from(await reader.read(laterThanServer ? NONCE_LEN : CHALLENGE_LEN - MAGIC_LEN));
    const nonceS = ch.subarray(0, NONCE_LEN);
    const purposeByte = Buffer.from([opts.purpose]);
    const expected = mac(opts.secret, [Buffer.from('S'), purposeByte, runId, nonceC, nonceS]);
    if (!laterThanServer && !timingSafeEqual(expected, ch.subarray(NONCE_LEN, NONCE_LEN + MAC_LEN))) {
      throw new AuthError(`${opts.what}: the server does not know this run's secret (DDP_SECRET differs)`, {
        op: 'handshake',
        rank: opts.rank,
      });
    }
    const rankBuf = Buffer.alloc(4);
    rankBuf.writeInt32LE(opts.rank);
    socket.write(mac(opts.secret, [Buffer.from('C'), purposeByte, rankBuf, runId, nonceS, nonceC]));
    const verdict = await reader.read(1);
    if (verdict[0] === EARLIER_ATTEMPT)
      throw new EarlierAttemptError(
        `${opts.what}: the other side belongs to an earlier attempt of this rank's run "${opts.runId}"`,
        {
          op: 'handshake',
          rank: opts.rank,
        },
      );
    // only a server that proved the secret accepts: after DDPL (no proof) anything but 2 is refused
    if (verdict[0] !== ACCEPTED || laterThanServer) {
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
  opts: {
    secret: string;
    runId: string;
    purpose: Purpose;
    timeoutMs: number;
    what: string;
    maxRank?: number;
    /** Called with the run id of a later attempt's client once it has proved the secret. */
    onLaterAttempt?: (runId: string) => void;
  },
): Promise<Handshaken> {
  const reader = new Reader(socket, opts.what, opts.timeoutMs);
  try {
    const hello = Buffer.from(await reader.read(HELLO_LEN));
    if (hello.toString('latin1', 0, 4) !== 'DDPH' || hello[4] !== VERSION) {
      throw new ProtocolError(`${opts.what}: not a ddp client (bad magic or version)`, { op: 'handshake' });
    }
    if (hello[5] !== opts.purpose)
      throw new ProtocolError(`${opts.what}: wrong purpose ${hello[5]}`, { op: 'handshake' });
    const rank = hello.readInt32LE(6);
    // the run before the rank: a rank of another world may well be out of this one's range
    const theirs = Buffer.from(await reader.read(hello[26])).toString('utf8');
    const later = theirs !== opts.runId && isEarlierAttempt(opts.runId, theirs);
    const runs = `refused a client of run "${theirs}" claiming rank ${rank}: this is run "${opts.runId}"`;
    if (theirs !== opts.runId && !later) {
      socket.end(Buffer.concat([Buffer.from('DDPX', 'latin1'), encodeRunId(opts.runId)]));
      throw new RunMismatchError(`${opts.what}: ${runs}`, { op: 'handshake', ranks: [rank] });
    }
    if (!later && (rank < -1 || (opts.maxRank !== undefined && rank > opts.maxRank))) {
      throw new ProtocolError(`${opts.what}: client claims out-of-range rank ${rank}`, { op: 'handshake' });
    }
    // a later attempt proves the secret for its own run id: only then may it end this attempt
    if (!(await clientProvesSecret(socket, reader, opts.secret, hello, encodeRunId(theirs), !later))) {
      socket.end(Buffer.from([0]));
      throw new AuthError(`${opts.what}: refused a client claiming rank ${rank}: wrong secret`, {
        op: 'handshake',
        ranks: [rank],
      });
    }
    if (later) {
      socket.end(Buffer.from([EARLIER_ATTEMPT]));
      opts.onLaterAttempt?.(theirs);
      // it waits for its own store, which this attempt's end frees
      throw new EarlierAttemptError(`${opts.what}: ${runs}, an earlier attempt`, { op: 'handshake', ranks: [rank] });
    }
    socket.write(Buffer.from([ACCEPTED]));
    return { peerRank: rank, leftover: reader.detach() };
  } catch (e) {
    reader.detach();
    if (!socket.writableEnded) socket.destroy();
    socket.on('error', () => {});
    throw e;
  }
}

/**
 * Challenges the client (with the server's own proof for `runId` when `proveFirst`) and checks the
 * client's proof for `runId`; true when it holds.
 */
async function clientProvesSecret(
  socket: Socket,
  reader: Reader,
  secret: string,
  hello: Buffer,
  runId: Buffer,
  proveFirst: boolean,
): Promise<boolean> {
  const nonceC = hello.subarray(10, 26);
  const nonceS = randomBytes(NONCE_LEN);
  const purposeByte = hello.subarray(5, 6);
  const proofS = proveFirst ? mac(secret, [Buffer.from('S'), purposeByte, runId, nonceC, nonceS]) : Buffer.alloc(0);
  socket.write(Buffer.concat([Buffer.from(proveFirst ? 'DDPS' : 'DDPL', 'latin1'), nonceS, proofS]));
  const proof = Buffer.from(await reader.read(MAC_LEN));
  const expected = mac(secret, [Buffer.from('C'), purposeByte, hello.subarray(6, 10), runId, nonceS, nonceC]);
  return timingSafeEqual(expected, proof);
}

import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AuthError,
  type CommError,
  CommTimeoutError,
  PeerLostError,
  ProtocolError,
  RunMismatchError,
} from '../errors.js';
import { startTimer } from '../timer.js';
import { channelOf, controlHeader, type Frame, type FrameHeader, FrameKind } from './frame.js';
import { FrameReader } from './frame-reader.js';
import { type ByteSource, clientHandshake, Purpose } from './handshake.js';
import { HEARTBEAT_CLOCK_BYTES, Heartbeat, heartbeatInterval, peerLoss, stallError } from './heartbeat.js';
import { Mailbox } from './mailbox.js';
import { PeerListener } from './peer-listener.js';
import { dial, type PeerAddress, type SocketAddress, writeFrame } from './socket-io.js';

export interface MeshOptions {
  rank: number;
  worldSize: number;
  secret: string;
  /** The run's id (DDP_RUN_ID): a peer of another run is refused (RunMismatchError). */
  runId: string;
  hostId: string;
  /** Use TCP even between ranks of one host (DDP_TRANSPORT=tcp). */
  forceTcp: boolean;
  /** Off for the main thread's mesh: a main thread busy computing must not look dead. */
  heartbeat?: boolean;
  /**
   * The comm thread's heartbeat clock (heartbeat.ts), shared with the main thread's mesh: it
   * tells a stall of this process from a peer's loss.
   */
  heartbeatClock?: Float64Array;
  /** [bytes, frames] this mesh has written to its sockets, headers and padding included. */
  wireCounters?: Float64Array;
}

/**
 * Full mesh of authenticated connections, run on the comm worker thread. Each rank dials
 * every other rank and reads only from the sockets it dialed (with `onread`, so bytes land
 * in its own buffers or straight in a posted receive's memory); it writes only to the
 * sockets it accepted. Data frames land in per-peer mailboxes; control frames (abort,
 * probe) go to onControl; a connection that closes without a goodbye calls onPeerLost.
 */
export class PeerMesh {
  readonly mailboxes: Mailbox[];
  /** Sockets this rank dialed: it reads from them. */
  private readonly inbound: (Socket | undefined)[];
  /** Sockets this rank accepted: it writes to them. */
  private readonly outbound: (Socket | undefined)[];
  /** Parsers of the inbound streams (to fail a receive caught mid-frame when a peer dies). */
  private readonly readers: (FrameReader | undefined)[] = [];
  private readonly listener: PeerListener;
  /** Connections refused or closed for bad bytes (for tests and diagnostics). */
  get refused(): number {
    return this.listener.refused;
  }
  private closing = false;
  private readonly said = new Set<number>(); // peers that said goodbye
  private arrived: (() => void) | null = null;
  onPeerLost: (peer: number, err: PeerLostError) => void = () => {};
  onControl: (peer: number, f: Frame) => void = () => {};
  /** Sees every data frame before its mailbox; returning false drops it. */
  admit: (peer: number, f: Frame) => boolean = () => true;
  onConnectionError: (err: CommError) => void = () => {};
  private readonly heartbeat: Heartbeat;
  private readonly heartbeatClock: Float64Array;

  constructor(readonly opts: MeshOptions) {
    const n = opts.worldSize;
    this.mailboxes = Array.from({ length: n }, () => new Mailbox());
    this.inbound = new Array(n).fill(undefined);
    this.outbound = new Array(n).fill(undefined);
    this.listener = new PeerListener(
      opts,
      (peer, sock, leftover) => this.adopt(peer, sock, leftover),
      (err) => this.onConnectionError(err),
    );
    this.heartbeatClock = opts.heartbeatClock ?? new Float64Array(new ArrayBuffer(HEARTBEAT_CLOCK_BYTES));
    const beat = controlHeader(FrameKind.Heartbeat);
    this.heartbeat = new Heartbeat(
      n,
      opts.heartbeat === false ? 0 : heartbeatInterval(),
      () => this.inbound.flatMap((s, i) => (s && !this.isLost(i) ? [i] : [])),
      (peer) => this.write(peer, beat, null),
      (peer, ms) => this.lose(peer, `nothing heard for ${ms} ms`),
      this.heartbeatClock,
    );
  }

  /** Listens on bindHost (TCP, free port) and on a fresh Unix socket (unix-socket.ts). */
  listen(bindHost: string): Promise<PeerAddress> {
    return this.listener.listen(bindHost);
  }

  /** Takes an authenticated connection from a peer as this rank's outbound stream to it. */
  private adopt(peerRank: number, sock: Socket, leftover: Uint8Array[]): void {
    if (peerRank < 0 || peerRank === this.opts.rank || this.outbound[peerRank] || leftover.length > 0) {
      throw new ProtocolError(`rank ${this.opts.rank}: unexpected connection claiming rank ${peerRank}`, {
        op: 'connect',
        ranks: [peerRank],
      });
    }
    this.outbound[peerRank] = sock;
    sock.setNoDelay(true);
    // nothing may arrive on a send-only connection
    sock.on('data', () => {
      sock.destroy();
      this.lose(peerRank, 'unexpected bytes on its send-only connection');
    });
    sock.on('close', () => this.lose(peerRank, 'connection closed'));
    this.arrived?.();
  }

  private complete(): boolean {
    return this.inbound.every((s, i) => i === this.opts.rank || (s && this.outbound[i]));
  }

  /** Dials every other rank and waits until every other rank has dialed this one. */
  async connect(addrs: PeerAddress[], timeoutMs: number): Promise<void> {
    const { rank } = this.opts;
    const deadline = Date.now() + timeoutMs;
    const allHere = new Promise<void>((resolve) => {
      this.arrived = () => {
        if (this.complete()) resolve();
      };
    });
    await Promise.all(
      addrs
        .filter((a) => a.rank !== rank)
        .map(async (a) => {
          const sameHost = !this.opts.forceTcp && a.uds !== null && a.hostId === this.opts.hostId;
          for (let attempt = 0; ; attempt++) {
            try {
              await this.dialPeer(a.rank, sameHost ? { path: a.uds as string } : { host: a.host, port: a.port });
              return;
            } catch (e) {
              if (e instanceof AuthError || e instanceof RunMismatchError || Date.now() > deadline) throw e;
              await sleep(Math.min(20 * 2 ** attempt, 500));
            }
          }
        }),
    );
    this.arrived?.();
    let stopTimer = () => {};
    const timeout = new Promise<never>((_, reject) => {
      stopTimer = startTimer(() => {
        const missing = this.outbound.flatMap((s, i) => (i === rank || s ? [] : [i]));
        const what = `rank ${rank}: ranks ${missing.join(', ')} never connected within ${timeoutMs} ms`;
        reject(new CommTimeoutError(what, { rank, ranks: missing, op: 'connect' }));
      }, deadline - Date.now());
    });
    await Promise.race([allHere, timeout]).finally(stopTimer);
    this.heartbeat.start();
  }

  /** Dials a peer's listener and makes the connection this rank's inbound stream from it. */
  private async dialPeer(peer: number, where: SocketAddress): Promise<void> {
    let handshakeBytes: ((c: Uint8Array) => void) | null = null;
    let reader: FrameReader | null = null;
    const spare = Buffer.allocUnsafeSlow(64 * 1024);
    const sock = await dial({
      ...where,
      onread: {
        buffer: () => (reader ? reader.nextBuffer() : spare),
        callback: (n: number, buf: Uint8Array) => {
          if (!reader) return handshakeBytes?.(buf.subarray(0, n));
          this.heartbeat.seen(peer);
          try {
            reader.consume(n, buf);
          } catch (e) {
            sock.destroy();
            this.lose(peer, e instanceof Error ? e.message : String(e));
          }
        },
      },
    });
    // dial() drops its one-shot listener on connect: a reset read must become this peer's loss, not a crash
    sock.on('error', (e) => this.lose(peer, `read failed: ${e.message}`));
    const source: ByteSource = (fn) => {
      handshakeBytes = fn;
      return () => {
        handshakeBytes = null;
      };
    };
    const { rank, secret, runId } = this.opts;
    const what = `rank ${rank} → rank ${peer}`;
    const hello = { secret, runId, purpose: Purpose.Peer, rank, timeoutMs: 10_000, what, source };
    const { leftover } = await clientHandshake(sock, hello);
    if (this.inbound[peer]) {
      sock.destroy();
      throw new ProtocolError(`rank ${rank}: already connected to rank ${peer}`, { op: 'connect', ranks: [peer] });
    }
    const r = new FrameReader(
      this.mailboxes[peer] as Mailbox,
      channelOf,
      (f) => this.dispatch(peer, f),
      `rank ${rank} ← rank ${peer}`,
    );
    this.inbound[peer] = sock;
    this.readers[peer] = r;
    sock.setNoDelay(true);
    sock.on('close', () => this.lose(peer, 'connection closed'));
    for (const c of leftover) r.push(c);
    reader = r;
  }

  private dispatch(peer: number, f: Frame): void {
    const k = f.header.kind;
    if (k === FrameKind.Data || k === FrameKind.P2P) {
      if (this.admit(peer, f)) this.mailboxes[peer]?.deliver(channelOf(f.header), f);
    } else if (k === FrameKind.Bye) this.farewell(peer);
    else if (k !== FrameKind.Heartbeat) this.onControl(peer, f);
  }

  /** A peer that left cleanly fails only the receives that wait on it; it poisons nothing. */
  private farewell(peer: number): void {
    this.said.add(peer);
    const box = this.mailboxes[peer] as Mailbox;
    box.failure ??= new PeerLostError(`rank ${this.opts.rank}: rank ${peer} has left (destroyProcessGroup)`, {
      rank: this.opts.rank,
      ranks: [peer],
    });
    box.failWaiters(box.failure);
  }

  private lose(peer: number, why: string): void {
    if (this.closing || this.said.has(peer)) return;
    const box = this.mailboxes[peer] as Mailbox;
    if (box.failure) return;
    const err = peerLoss(this.heartbeatClock, this.opts.rank, peer, why);
    box.failure = err;
    box.failWaiters(err);
    this.readers[peer]?.abort(err);
    this.inbound[peer]?.destroy();
    this.outbound[peer]?.destroy();
    this.onPeerLost(peer, err);
  }

  /** RankStalledError if this process itself stalled (a peer's verdict `err` follows from it), else null. */
  ownStall(err: CommError): CommError | null {
    return stallError(this.heartbeatClock, this.opts.rank, err.message, err);
  }

  isLost(peer: number): boolean {
    return this.mailboxes[peer]?.failure != null;
  }

  /** Queues a frame; `done` runs once the bytes are handed to the kernel. */
  write(peer: number, header: FrameHeader, payload: Uint8Array | null, done?: (err?: Error | null) => void): void {
    const sock = this.outbound[peer];
    const box = this.mailboxes[peer] as Mailbox;
    if (!sock || sock.destroyed || box.failure) {
      done?.(
        box.failure ??
          new PeerLostError(`rank ${this.opts.rank}: no connection to rank ${peer}`, {
            rank: this.opts.rank,
            ranks: [peer],
          }),
      );
      return;
    }
    // a write fails only when the peer is gone: report it as that peer's loss
    const cb = (err?: Error | null) => {
      if (!err) return done?.();
      this.lose(peer, `write failed: ${err.message}`);
      done?.(
        box.failure ??
          new PeerLostError(`rank ${this.opts.rank}: lost rank ${peer} (${err.message})`, {
            rank: this.opts.rank,
            ranks: [peer],
          }),
      );
    };
    writeFrame(sock, header, payload, cb, this.opts.wireCounters);
  }

  /** Says goodbye to every peer, then closes sockets and listeners. */
  async close(): Promise<void> {
    this.heartbeat.stop();
    const bye = controlHeader(FrameKind.Bye);
    await Promise.all(
      this.outbound.map(
        (s, i) =>
          new Promise<void>((resolve) => {
            if (!s || s.destroyed) return resolve();
            this.write(i, bye, null, () => resolve());
          }),
      ),
    );
    this.closing = true;
    for (const s of this.outbound) s?.end();
    await this.listener.close();
    for (const s of [...this.inbound, ...this.outbound]) s?.destroy();
  }
}

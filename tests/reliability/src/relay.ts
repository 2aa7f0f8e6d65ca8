import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A fault-injecting TCP relay. Each route is a front listener forwarding every accepted
 * connection to one target; the bytes of both directions pass through a pipe that can
 * delay them (with jitter, keeping their order), read them slowly, stall, reset the
 * connection (RST) or half-close one direction (FIN while the other stays open).
 */

export interface FaultPlan {
  /** Added to every chunk, each way. */
  delayMs?: number;
  /** Uniform extra delay in [0, jitterMs) per chunk; order is kept. */
  jitterMs?: number;
  /** Slow reads: read at most this many bytes per second from each sender (kernel buffers then fill). */
  readBytesPerSec?: number;
  /** Periodic stall: every stallEveryMs, nothing is forwarded for stallMs. */
  stallEveryMs?: number;
  stallMs?: number;
}

export interface Target {
  host: string;
  port: number;
}

export type Direction = 'toDialer' | 'toListener';

/** One relayed connection: the dialer's socket (accepted by the front) and the upstream one. */
export class RelayConnection {
  private halfClosed = new Set<Direction>();
  constructor(
    readonly label: string,
    readonly dialer: Socket,
    readonly upstream: Socket,
  ) {}

  /** Both ends (or only the dialer's, or only the listener's) get a TCP RST; the other side, if any, a FIN. */
  reset(side: 'both' | 'dialer' | 'listener' = 'both'): void {
    const rst = side === 'both' ? [this.dialer, this.upstream] : [side === 'dialer' ? this.dialer : this.upstream];
    for (const s of rst) if (!s.destroyed) s.resetAndDestroy();
  }

  /** Sends FIN one way (as a peer calling shutdown(SHUT_WR)); the other way keeps flowing. */
  halfClose(direction: Direction): void {
    this.halfClosed.add(direction);
    (direction === 'toDialer' ? this.dialer : this.upstream).end();
  }

  isHalfClosed(direction: Direction): boolean {
    return this.halfClosed.has(direction);
  }
}

/** Small seeded generator (mulberry32) so a run's jitter is reproducible. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const HIGH_WATER = 1 << 20;

export class FaultRelay {
  plan: FaultPlan;
  /** Bytes forwarded so far, both ways, all routes. */
  bytes = 0;
  readonly connections: RelayConnection[] = [];
  private readonly servers: Server[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly random: () => number;
  private stalledUntil = 0;
  private stallTimer: NodeJS.Timeout | undefined;
  private byteWaiters: { n: number; resolve: () => void }[] = [];
  private control: Server | null = null;
  private closed = false;

  constructor(
    readonly host = '127.0.0.1',
    plan: FaultPlan = {},
    seed = 1,
  ) {
    this.plan = plan;
    this.random = seededRandom(seed);
    this.setPlan(plan);
  }

  setPlan(plan: FaultPlan): void {
    this.plan = plan;
    clearInterval(this.stallTimer);
    this.stallTimer = undefined;
    if (plan.stallEveryMs && plan.stallMs) {
      this.stallTimer = setInterval(() => this.stall(plan.stallMs as number), plan.stallEveryMs);
      this.stallTimer.unref();
    }
  }

  /** Nothing is forwarded for ms milliseconds (bytes queue up, then flow in order). */
  stall(ms: number): void {
    this.stalledUntil = Math.max(this.stalledUntil, Date.now() + ms);
  }

  /** Opens a front listener for target; returns where to dial instead. */
  async route(target: Target, label: string, port = 0): Promise<Target> {
    const server = createServer({ allowHalfOpen: true, noDelay: true }, (dialer) => this.accept(dialer, target, label));
    server.on('error', () => {});
    server.listen(port, this.host);
    await once(server, 'listening');
    this.servers.push(server);
    const a = server.address();
    return { host: this.host, port: typeof a === 'object' && a ? a.port : 0 };
  }

  /** Resolves once at least n bytes have been forwarded in total. */
  whenBytes(n: number): Promise<void> {
    if (this.bytes >= n) return Promise.resolve();
    return new Promise((resolve) => this.byteWaiters.push({ n, resolve }));
  }

  /** Connections whose route label matches (all when no filter). */
  select(filter?: (label: string) => boolean): RelayConnection[] {
    return this.connections.filter((c) => !filter || filter(c.label));
  }

  resetAll(filter?: (label: string) => boolean, side: 'both' | 'dialer' | 'listener' = 'both'): number {
    const cs = this.select(filter);
    for (const c of cs) c.reset(side);
    return cs.length;
  }

  halfCloseAll(direction: Direction, filter?: (label: string) => boolean): number {
    const cs = this.select(filter);
    for (const c of cs) c.halfClose(direction);
    return cs.length;
  }

  private accept(dialer: Socket, target: Target, label: string): void {
    if (this.closed) return void dialer.destroy();
    const upstream = connect({ host: target.host, port: target.port, allowHalfOpen: true, noDelay: true });
    const conn = new RelayConnection(label, dialer, upstream);
    this.connections.push(conn);
    for (const s of [dialer, upstream]) {
      this.sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        this.sockets.delete(s);
        // a side that died takes the other with it (as a process exit would)
        const other = s === dialer ? upstream : dialer;
        if (!other.destroyed && !conn.isHalfClosed(s === dialer ? 'toDialer' : 'toListener')) other.destroy();
      });
    }
    this.pipe(dialer, upstream, () => conn.isHalfClosed('toListener'));
    this.pipe(upstream, dialer, () => conn.isHalfClosed('toDialer'));
  }

  /** Forwards src to dst through the fault plan, in order, with backpressure. */
  private pipe(src: Socket, dst: Socket, cut: () => boolean): void {
    const queue: { at: number; chunk: Buffer }[] = [];
    let queued = 0;
    let lastAt = 0;
    let flushing = false;
    let ended = false;
    let slowPaused = false;
    const flush = async () => {
      if (flushing) return;
      flushing = true;
      try {
        while (queue.length > 0) {
          const head = queue[0] as { at: number; chunk: Buffer };
          const wait = Math.max(head.at, this.stalledUntil) - Date.now();
          if (wait > 0) {
            await sleep(wait);
            continue;
          }
          queue.shift();
          queued -= head.chunk.length;
          if (cut() || dst.destroyed) continue; // a half-closed direction swallows its bytes
          this.count(head.chunk.length);
          // an error (EPIPE: the peer went, as the faults make it) ends the wait; the direction is dead
          if (!dst.write(head.chunk))
            await Promise.race([once(dst, 'drain'), once(dst, 'close')]).catch(() => undefined);
          if (queued < HIGH_WATER && src.isPaused() && !slowPaused) src.resume();
        }
        if (ended && !cut() && !dst.destroyed) dst.end();
      } finally {
        flushing = false;
      }
    };
    src.on('data', (chunk: Buffer) => {
      const { delayMs = 0, jitterMs = 0, readBytesPerSec } = this.plan;
      const at = Math.max(lastAt, Date.now() + delayMs + (jitterMs > 0 ? this.random() * jitterMs : 0));
      lastAt = at;
      queue.push({ at, chunk });
      queued += chunk.length;
      if (queued >= HIGH_WATER) src.pause();
      if (readBytesPerSec) {
        // read slowly: after n bytes, stop reading for n / rate seconds
        src.pause();
        slowPaused = true;
        setTimeout(
          () => {
            slowPaused = false;
            if (queued < HIGH_WATER && !src.destroyed) src.resume();
          },
          (1000 * chunk.length) / readBytesPerSec,
        ).unref();
      }
      void flush();
    });
    src.on('end', () => {
      ended = true;
      void flush();
    });
  }

  private count(n: number): void {
    this.bytes += n;
    if (this.byteWaiters.length === 0) return;
    const ready = this.byteWaiters.filter((w) => this.bytes >= w.n);
    this.byteWaiters = this.byteWaiters.filter((w) => this.bytes < w.n);
    for (const w of ready) w.resolve();
  }

  /**
   * A control listener for rank processes: each line `{"target":{host,port},"label":…}`
   * gets back the line `{"host":…,"port":…}` of a new route (see RelayClient).
   */
  async listenControl(): Promise<Target> {
    const server = createServer((s) => {
      s.on('error', () => {});
      let pending = '';
      s.on('data', (c: Buffer) => {
        pending += c.toString();
        const lines = pending.split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines) {
          const req = JSON.parse(line) as { target: Target; label: string };
          void this.route(req.target, req.label).then((front) => s.write(`${JSON.stringify(front)}\n`));
        }
      });
    });
    server.listen(0, this.host);
    await once(server, 'listening');
    this.control = server;
    const a = server.address();
    return { host: this.host, port: typeof a === 'object' && a ? a.port : 0 };
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.stallTimer);
    for (const s of this.sockets) s.destroy();
    await Promise.all(
      [...this.servers, ...(this.control ? [this.control] : [])].map(
        (s) => new Promise<void>((r) => s.close(() => r())),
      ),
    );
  }
}

/** Asks a relay's control listener (from a rank process) for a route to target. */
export async function requestRoute(control: Target, target: Target, label: string): Promise<Target> {
  const s = connect(control);
  await once(s, 'connect');
  s.write(`${JSON.stringify({ target, label })}\n`);
  let text = '';
  for await (const c of s) {
    text += (c as Buffer).toString();
    if (text.includes('\n')) break;
  }
  s.destroy();
  return JSON.parse(text.split('\n')[0]) as Target;
}

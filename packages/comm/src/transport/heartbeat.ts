/**
 * Liveness of peers whose sockets stay open although nobody answers (a host that lost
 * power or network, a process stopped by a debugger): every interval each peer gets a tiny
 * frame, and a peer from which nothing at all has arrived for 10 intervals is declared lost
 * (10–11 s at the default 1 s: on a shared, overloaded machine a healthy process can go
 * unscheduled for seconds, and a false loss kills the whole world).
 * A dead process needs none of this: the OS closes its sockets at once.
 */
export class Heartbeat {
  private readonly lastSeen: number[];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    worldSize: number,
    private readonly intervalMs: number,
    private readonly peers: () => number[],
    private readonly ping: (peer: number) => void,
    private readonly silent: (peer: number, ms: number) => void,
  ) {
    this.lastSeen = new Array(worldSize).fill(Date.now());
  }

  seen(peer: number): void {
    this.lastSeen[peer] = Date.now();
  }

  start(): void {
    if (this.intervalMs <= 0) return;
    this.lastSeen.fill(Date.now());
    this.timer = setInterval(() => {
      const now = Date.now();
      for (const p of this.peers()) {
        this.ping(p);
        const quiet = now - (this.lastSeen[p] as number);
        if (quiet > 10 * this.intervalMs) this.silent(p, quiet);
      }
    }, this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

/** DDP_HEARTBEAT_MS (default 1000; 0 turns heartbeats off). */
export function heartbeatInterval(): number {
  const raw = process.env.DDP_HEARTBEAT_MS;
  const v = Number(raw);
  return raw === undefined || raw === '' || !Number.isFinite(v) || v < 0 ? 1000 : v;
}

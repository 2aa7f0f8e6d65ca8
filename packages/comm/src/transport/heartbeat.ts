import { PeerLostError, RankStalledError } from '../errors.js';

/** Milliseconds on a clock that steps with neither NTP nor the wall, comparable across threads. */
const monotonicMs = (): number => performance.timeOrigin + performance.now();

/** Cells of a heartbeat clock: last tick, end of the last long stall, its length, the loss limit. */
const LAST_TICK = 0;
const STALL_END = 1;
const STALL_MS = 2;
const LIMIT_MS = 3;
export const HEARTBEAT_CLOCK_BYTES = 4 * Float64Array.BYTES_PER_ELEMENT;

/**
 * Liveness of peers whose sockets stay open although nobody answers (a host that lost
 * power or network, a process stopped by a debugger): every interval each peer gets a tiny
 * frame, and a peer from which nothing at all has arrived for 10 intervals is declared lost
 * (10–11 s at the default 1 s: on a shared, overloaded machine a healthy process can go
 * unscheduled for seconds, and a false loss kills the whole world).
 * A dead process needs none of this: the OS closes its sockets at once.
 *
 * The same timer tells when this process itself was not running (SIGSTOP, swapped out,
 * starved): a tick that comes 10 intervals late. Its peers will then have given it up and
 * closed their sockets, which this rank sees first on waking; `stalledFor` lets it say that
 * it was stalled instead of blaming a healthy peer. The clock lives in `clock` (shared
 * memory) so the main thread's mesh, which sends no heartbeats, can ask too.
 */
export class Heartbeat {
  private readonly lastSeen: number[];
  private timer: NodeJS.Timeout | null = null;
  private readonly limitMs: number;

  constructor(
    worldSize: number,
    private readonly intervalMs: number,
    private readonly peers: () => number[],
    private readonly ping: (peer: number) => void,
    private readonly silent: (peer: number, ms: number) => void,
    private readonly clock: Float64Array,
  ) {
    this.lastSeen = new Array(worldSize).fill(monotonicMs());
    this.limitMs = 10 * intervalMs;
  }

  seen(peer: number): void {
    this.lastSeen[peer] = monotonicMs();
  }

  start(): void {
    if (this.intervalMs <= 0) return;
    this.lastSeen.fill(monotonicMs());
    this.clock[LIMIT_MS] = this.limitMs;
    this.clock[LAST_TICK] = monotonicMs();
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
  }

  private tick(): void {
    const now = monotonicMs();
    const late = now - this.clock[LAST_TICK];
    this.clock[LAST_TICK] = now;
    if (late > this.limitMs) {
      this.clock[STALL_END] = now;
      this.clock[STALL_MS] = late - this.intervalMs;
      // nothing was read while this process stood still: judge the peers from now on
      this.lastSeen.fill(now);
    }
    for (const p of this.peers()) {
      this.ping(p);
      const quiet = now - this.lastSeen[p];
      if (quiet > this.limitMs) this.silent(p, Math.round(quiet));
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.clock[LAST_TICK] = 0;
  }
}

/**
 * How long this process was stalled, if long enough for its peers to have given it up
 * (`limitMs`) and recently enough that a loss seen now is their doing: the heartbeat timer
 * is that late right now, or was within the last limit. Null otherwise, and when heartbeats are off.
 */
function recentStall(clock: Float64Array): { stalledMs: number; limitMs: number } | null {
  const [lastTick = 0, stallEnd = 0, stallMs = 0, limitMs = 0] = clock;
  if (lastTick === 0) return null;
  const now = monotonicMs();
  if (now - lastTick > limitMs) return { stalledMs: Math.round(now - lastTick), limitMs };
  return stallMs > 0 && now - stallEnd < limitMs ? { stalledMs: Math.round(stallMs), limitMs } : null;
}

/**
 * This rank's own recent stall, as the error to raise instead of what its peers did meanwhile
 * (`what`: gave it up as lost, aborted the group), or null when it did not stall.
 */
export function stallError(clock: Float64Array, rank: number, what: string, cause?: Error): RankStalledError | null {
  const stall = recentStall(clock);
  if (!stall) return null;
  return new RankStalledError(
    `rank ${rank}: this rank was stalled for ${stall.stalledMs} ms ` +
      '(its comm thread did not run: the process was stopped, swapped out, starved of CPU or blocked), ' +
      `longer than its peers wait (${stall.limitMs} ms), so they gave it up: ${what}`,
    { rank, ranks: [rank], cause },
  );
}

/** The loss of `peer` as rank `rank` saw it, or its own stall when the heartbeat clock says it stood still too long. */
export function peerLoss(clock: Float64Array, rank: number, peer: number, why: string): PeerLostError {
  const what = `lost rank ${peer} (${why})`;
  return stallError(clock, rank, what) ?? new PeerLostError(`rank ${rank}: ${what}`, { rank, ranks: [peer] });
}

/** DDP_HEARTBEAT_MS (default 1000; 0 turns heartbeats off). */
export function heartbeatInterval(): number {
  const raw = process.env.DDP_HEARTBEAT_MS;
  const v = Number(raw);
  return raw === undefined || raw === '' || !Number.isFinite(v) || v < 0 ? 1000 : v;
}

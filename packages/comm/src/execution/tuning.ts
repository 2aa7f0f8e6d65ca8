import { MAX_FRAME_PAYLOAD } from '../transport/frame.js';
import type { OpContext } from './op-context.js';

/**
 * Algorithm switch-over and segment size. A message of `bytes` on N ranks uses the
 * one-round direct algorithms while bytes·(N−1) ≤ ringThresholdBytes, else the pipelined
 * ring. The defaults come from the sweep in apps/bench (src/comm.ts, which forces each
 * algorithm through these variables); the environment overrides them for experiments.
 */
function envBytes(name: string, fallback: number): number {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : fallback;
}

/**
 * A segment travels as one frame: one above the frame limit was refused by the peer's reader, which
 * named a healthy rank as lost (probe BM, DDP_SEGMENT_BYTES=64 MiB); clamped, said once.
 */
function segmentBytes(): number {
  const asked = envBytes('DDP_SEGMENT_BYTES', 1024 * 1024);
  if (asked <= MAX_FRAME_PAYLOAD) return asked;
  process.emitWarning(`DDP_SEGMENT_BYTES=${asked} exceeds the frame limit; segments of ${MAX_FRAME_PAYLOAD} bytes`, {
    code: 'DDP_SEGMENT_BYTES_CLAMPED',
  });
  return MAX_FRAME_PAYLOAD;
}

export const tuning = {
  ringThresholdBytes: envBytes('DDP_RING_THRESHOLD_BYTES', 128 * 1024),
  segmentBytes: segmentBytes(),
  /**
   * Shared-memory waits (shm-lane.ts) spin for spinMs [comm lane, main lane], then block on
   * a futex for up to blockMs, then sleep on the thread pool. Measured by `pnpm bench
   * shm-wait` (4 KiB all-reduces back to back on 2 ranks, warm, main lane): thread pool only
   * 202–227 µs; blocking futex, no spin 75–92 µs; spin, no blocking 14–22 µs; both 16–21 µs
   * (Unix sockets: 85–131 µs). The main thread runs
   * only small collectives, whose peers are usually microseconds away; the comm thread
   * spins little, its cores are busy with backward. Ranks that outnumber the cores never spin.
   */
  shmSpinMs: [envBytes('DDP_SHM_SPIN_MS', 0.05), envBytes('DDP_SHM_SPIN_MS', 1)] as const,
  shmBlockMs: envBytes('DDP_SHM_BLOCK_MS', 2),
};

/**
 * Direct (one round) or ring? Direct moves (N−1)·bytes per rank in one step and reduces
 * N−1 inputs on every rank; the ring moves 2(N−1)/N·bytes in 2(N−1) steps. Measured
 * (apps/bench comm, each forced): on an idle machine direct still wins at 64 KiB on 2 and
 * 4 ranks (685 vs 827 µs; 2328 vs 2488 µs) and the ring from 256 KiB; under load the ring
 * won from 64 KiB. Hence direct while (N−1)·bytes ≤ 128 KiB.
 */
export function small(ctx: OpContext, bytes: number): boolean {
  return bytes * (ctx.size - 1) <= tuning.ringThresholdBytes || ctx.size === 1;
}

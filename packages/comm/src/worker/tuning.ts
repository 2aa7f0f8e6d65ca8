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

export const tuning = {
  ringThresholdBytes: envBytes('DDP_RING_THRESHOLD_BYTES', 128 * 1024),
  segmentBytes: envBytes('DDP_SEGMENT_BYTES', 1024 * 1024),
};

import { readFileSync } from 'node:fs';

/**
 * OpenBLAS's kernel sets by the x86 features they need, widest first. Debian's OpenBLAS 0.3.21
 * picks one at load from the CPU's model number and falls back to Prescott (SSE3) on models it
 * does not know: on this project's Xeon (AVX-512, reported as a generic "Intel(R) Xeon(R)
 * Processor") sgemm ran at 27–31 GFLOP/s per core instead of 78–133 with its SkylakeX kernels.
 */
const OPENBLAS_CORES: [core: string, flags: string[]][] = [
  ['SkylakeX', ['avx512f', 'avx512cd', 'avx512bw', 'avx512dq', 'avx512vl']],
  ['Haswell', ['avx2', 'fma']],
];

/** The OpenBLAS kernel set for a CPU with these /proc/cpuinfo flags, or null (OpenBLAS's own choice). */
export function openblasCoreFor(cpuinfo: string): string | null {
  const flags = new Set(/^flags\s*:(.*)$/m.exec(cpuinfo)?.[1]?.trim().split(/\s+/) ?? []);
  return OPENBLAS_CORES.find(([, need]) => need.every((f) => flags.has(f)))?.[0] ?? null;
}

function cpuinfo(): string {
  try {
    return readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    return ''; // not Linux: OpenBLAS chooses
  }
}

/**
 * Sets OPENBLAS_CORETYPE in `env` (read by OpenBLAS when the addon loads it, and inherited by the
 * processes this one starts) from the CPU's features, unless the user set it.
 */
export function chooseOpenBLASCore(env: NodeJS.ProcessEnv = process.env, info: string = cpuinfo()): void {
  if (env.OPENBLAS_CORETYPE !== undefined) return;
  const core = openblasCoreFor(info);
  if (core) env.OPENBLAS_CORETYPE = core;
}

/**
 * What bounds a matmul's 2-thread speed-up on this machine: src/stream.c (built here with cc) reads
 * and writes a buffer of each product's bytes at 1 and 2 threads, and each matmul row is set against
 * it: the GB/s the product moves at its 1-thread speed, the GB/s a 1.7× speed-up at 2 threads would
 * need, and the GB/s the machine gives at 1 and 2 threads for that working set.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Row } from '@ddp/plot';
import type { MatmulCase } from './kernel-cases.js';

/** The 2-thread speed-up issue #14 asks for. */
export const TARGET_SPEEDUP = 1.7;

interface Bandwidth {
  bytes: number;
  threads: number;
  readGBs: number;
  writeGBs: number;
}

/** GB/s by working-set bytes and thread count, or why the probe cannot run. */
export function streamBandwidth(sizes: number[]): Bandwidth[] | string {
  const bin = join(mkdtempSync(join(tmpdir(), 'ddp-bench-stream-')), 'stream');
  try {
    const source = fileURLToPath(new URL('../stream.c', import.meta.url));
    execFileSync('cc', ['-O3', '-march=native', '-ffast-math', '-fopenmp', '-o', bin, source], { stdio: 'pipe' });
  } catch (e) {
    return `cc failed: ${(e as Error).message.split('\n')[0]}`;
  }
  const out = execFileSync(bin, sizes.map(String), { encoding: 'utf8', timeout: 300_000 });
  return out
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Bandwidth);
}

/** A matmul case's bytes: A, B and C once each, float32. */
export const productBytes = ({ m, n, k }: MatmulCase) => 4 * (m * k + k * n + m * n);

/**
 * One row per matmul case: its bytes, the 2-thread ÷ 1-thread ratio of native and PyTorch, the GB/s
 * it moves at native's 1-thread speed and needs for TARGET_SPEEDUP, and the machine's read GB/s.
 */
export function memoryBoundRows(matmulRows: Row[], cases: MatmulCase[], bandwidth: Bandwidth[]): Row[] {
  const rows: Row[] = [];
  for (const one of matmulRows.filter((r) => r.threads === 1)) {
    const two = matmulRows.find((r) => r.case === one.case && r.threads === 2);
    if (!two) continue;
    const c = cases[one.case as number];
    const bytes = productBytes(c);
    const ratio = (x: Row, y: Row, key: string) =>
      typeof x[key] === 'number' && typeof y[key] === 'number' ? x[key] / y[key] : null;
    // bytes per product × products per second (GFLOP/s ÷ GFLOP per product)
    const oneThreadGBs = typeof one.native === 'number' ? (bytes * one.native) / (2 * c.m * c.n * c.k) : null;
    const at = (threads: number) => bandwidth.find((b) => b.bytes === bytes && b.threads === threads);
    rows.push({
      case: one.case,
      layer: one.layer,
      pass: one.pass,
      MiB: bytes / 2 ** 20,
      'native 2t÷1t': ratio(two, one, 'native'),
      'torch 2t÷1t': ratio(two, one, 'torch'),
      'GB/s at 1t': oneThreadGBs,
      [`GB/s for ${TARGET_SPEEDUP}×`]: oneThreadGBs === null ? null : oneThreadGBs * TARGET_SPEEDUP,
      'read GB/s 1t': at(1)?.readGBs ?? null,
      'read GB/s 2t': at(2)?.readGBs ?? null,
      'write GB/s 1t': at(1)?.writeGBs ?? null,
      'write GB/s 2t': at(2)?.writeGBs ?? null,
    });
  }
  return rows;
}

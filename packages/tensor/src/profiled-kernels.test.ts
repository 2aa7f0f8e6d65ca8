// Native kernels interrupted by signals (native-kernels' signal-guard.h): oneDNN 2.6's kernels
// corrupted the process heap when a signal handler ran mid-call, so `node --cpu-prof` (SIGPROF
// every interval) aborted ranks in glibc's free within the first steps.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useNativeKernels } from './index.js';

describe.skipIf(!useNativeKernels(true))('native kernels under a sampling profiler', () => {
  it('give the same bits every time and the process ends normally', { timeout: 120_000 }, () => {
    const profiles = mkdtempSync(join(tmpdir(), 'ddp-cpu-prof-'));
    try {
      const r = spawnSync(
        process.execPath,
        [
          '--cpu-prof',
          `--cpu-prof-dir=${profiles}`,
          '--conditions=@ddp/source',
          '--import',
          'tsx',
          new URL('./test/profiled-kernels.child.ts', import.meta.url).pathname,
        ],
        { encoding: 'utf8', timeout: 110_000, env: { ...process.env, DDP_NUM_THREADS: '1' } },
      );
      expect(r.stderr.split('\n').filter((l) => l !== '' && !/ddp: native kernels on/.test(l))).toEqual([]);
      expect([r.status, r.signal, r.stdout]).toEqual([0, null, 'done 0\n']);
    } finally {
      rmSync(profiles, { recursive: true, force: true });
    }
  });
});

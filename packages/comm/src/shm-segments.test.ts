import { mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { removeStaleSegments, segmentToken } from './transport/shm-segments.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A pid no process has: past the kernel's pid_max. */
const DEAD_PID = 4_194_304 + 9;
const ours = /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1];

describe('shared-memory segment names left by killed jobs', () => {
  it('removes those of dead creators in this PID namespace only (was: 17 MB left per job killed at start-up)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-shm-'));
    dirs.push(dir);
    const [, , hex] = segmentToken().split('-');
    const names = {
      dead: `ddp-${ours}-${DEAD_PID}-${hex}-0`,
      live: `ddp-${segmentToken()}-0`, // this process's
      otherNamespace: `ddp-1-${DEAD_PID}-${hex}-0`,
      notOurs: 'ddp-something-else',
    };
    for (const name of Object.values(names)) writeFileSync(join(dir, name), '');
    expect(removeStaleSegments(dir)).toEqual([names.dead]);
    expect(readdirSync(dir).sort()).toEqual([names.live, names.notOurs, names.otherNamespace].sort());
  });
});

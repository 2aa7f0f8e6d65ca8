// A worker thread ended while this addon's work is on libuv's thread pool: Node closes the
// worker's loop without waiting for an addon's uv_work_t and aborts the whole process
// ("uv_loop_close() while having open handles") unless the addon holds the teardown.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadSharedMemory } from './index.js';

const addon = fileURLToPath(new URL('../build/Release/ddp_shm.node', import.meta.url));

/** A process whose worker starts `pending` on the addon, terminated `afterMs` later; what it printed. */
function terminateWorkerWith(
  pending: string,
  afterMs: number,
): { status: number | null; stdout: string; stderr: string } {
  const worker = `
    const shm = require(${JSON.stringify(addon)});
    const sab = new SharedArrayBuffer(1 << 24);
    ${pending};
    require('node:worker_threads').parentPort.postMessage('started');`;
  const main = `
    const { Worker } = require('node:worker_threads');
    const w = new Worker(${JSON.stringify(worker)}, { eval: true });
    w.on('message', () => setTimeout(() => w.terminate().then(() => console.log('terminated')), ${afterMs}));`;
  const r = spawnSync(process.execPath, ['-e', main], { encoding: 'utf8', timeout: 20_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe.skipIf(!loadSharedMemory())('a worker terminated with the addon’s work in flight', () => {
  it('ends cleanly while a futex wait sleeps (woken, not waited out: its timeout is a minute)', () => {
    const r = terminateWorkerWith('shm.wait(sab, 0, 0, 60_000)', 50);
    expect(r.stderr).toBe('');
    expect([r.status, r.stdout]).toEqual([0, 'terminated\n']);
  });

  it('ends cleanly while finite checks run on the thread pool', () => {
    const r = terminateWorkerWith('for (let i = 0; i < 64; i++) shm.allFiniteAsync(new Float32Array(sab))', 0);
    expect(r.stderr).toBe('');
    expect([r.status, r.stdout]).toEqual([0, 'terminated\n']);
  });
});

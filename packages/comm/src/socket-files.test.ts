import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { explain, spawnRanks } from '@ddp/launch/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { removeStaleSocketFiles } from './transport/unix-socket.js';

/** Socket files in the temp directory that name one of `pids` (other worktrees' tests run beside this one). */
const socketFilesOf = (pids: number[]) =>
  readdirSync(tmpdir()).filter((f) => pids.some((pid) => f.startsWith(`ddp-${pid}-`) && f.endsWith('.sock')));

/** A process listening on a ddp-style socket file named after its own pid, killed with -9: a real stale file. */
async function staleSocketFile(dir: string): Promise<{ path: string; pid: number }> {
  const code = `const p = require('path').join(${JSON.stringify(dir)}, 'ddp-' + process.pid + '-0badc0de.sock');
require('net').createServer().listen(p, () => console.log(p));`;
  const child: ChildProcess = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const path = await new Promise<string>((resolve) =>
    child.stdout?.once('data', (b: Buffer) => resolve(b.toString().trim())),
  );
  const gone = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await gone;
  return { path, pid: child.pid as number };
}

function listenOn(path: string): Promise<Server> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(path, () => resolve(s));
  });
}

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

describe('Unix socket files', () => {
  it('a world leaves none behind, whether it ends cleanly or its ranks are killed with -9', async () => {
    const clean: number[] = [];
    const ok = await spawnRanks({
      nprocs: 3,
      script: new URL('./test/rendezvous.child.ts', import.meta.url),
      args: ['init'],
      env: { DDP_TRANSPORT: 'uds' },
      onSpawn: (_r, c) => clean.push(c.pid as number),
    });
    expect(
      ok.map((o) => (o.results[0] as { sum?: number }).sum),
      explain(ok),
    ).toEqual([6, 6, 6]);
    expect(socketFilesOf(clean)).toEqual([]);

    const killed: number[] = [];
    const children: ChildProcess[] = [];
    let up = 0;
    const out = await spawnRanks({
      nprocs: 3,
      script: new URL('./test/rendezvous.child.ts', import.meta.url),
      args: ['hold', join(tmpdir(), 'ddp-never-created')],
      env: { DDP_TRANSPORT: 'uds' },
      onSpawn: (_r, c) => {
        killed.push(c.pid as number);
        children.push(c);
      },
      onResult: () => {
        if (++up === 3) for (const c of children) c.kill('SIGKILL');
      },
    });
    expect(
      out.map((o) => o.signal),
      explain(out),
    ).toEqual(['SIGKILL', 'SIGKILL', 'SIGKILL']);
    expect(socketFilesOf(killed)).toEqual([]);
  }, 90_000);

  it('a starting world removes the socket files of dead ranks, and only those', async () => {
    const stale = await staleSocketFile(tmpdir());
    expect(existsSync(stale.path)).toBe(true);
    const out = await spawnRanks({
      nprocs: 2,
      script: new URL('./test/rendezvous.child.ts', import.meta.url),
      args: ['init'],
    });
    expect(
      out.map((o) => (o.results[0] as { sum?: number }).sum),
      explain(out),
    ).toEqual([3, 3]);
    expect(existsSync(stale.path)).toBe(false);
  }, 60_000);

  it('keeps a file whose pid is alive, or on which something listens although its pid looks dead', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-sweep-'));
    try {
      const stale = await staleSocketFile(dir);
      const live = join(dir, `ddp-${process.pid}-11.sock`);
      // the pid of a process in another pid namespace looks dead from here
      const otherNamespace = join(dir, `ddp-${stale.pid}-22.sock`);
      servers.push(await listenOn(live), await listenOn(otherNamespace));
      expect(await removeStaleSocketFiles(dir)).toEqual([stale.path]);
      expect(readdirSync(dir).sort()).toEqual([`ddp-${process.pid}-11.sock`, `ddp-${stale.pid}-22.sock`].sort());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});

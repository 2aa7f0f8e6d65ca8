import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';
import { runCases } from './collective-cases.js';
import { fakeWorld } from './fake-process-group.js';
import { expectAllClose } from './test-utils.js';

const WORLD = 2;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** Starts one process per rank on collectives.child.ts; resolves with each rank's RESULT line. */
async function runRanks(timeoutMs: number): Promise<{ rank: number; grads: Record<string, number[]> }[]> {
  const port = String(await freePort());
  const script = fileURLToPath(new URL('./collectives.child.ts', import.meta.url));
  return Promise.all(
    [...Array(WORLD).keys()].map(
      (rank) =>
        new Promise<{ rank: number; grads: Record<string, number[]> }>((resolve, reject) => {
          const env = { ...process.env, RANK: `${rank}`, WORLD_SIZE: `${WORLD}`, LOCAL_RANK: `${rank}`, LOCAL_WORLD_SIZE: `${WORLD}` };
          const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', script], {
            env: { ...env, MASTER_ADDR: '127.0.0.1', MASTER_PORT: port, DDP_SECRET: 'autograd-test' },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          let out = '';
          let err = '';
          child.stdout.on('data', (c: Buffer) => (out += c.toString()));
          child.stderr.on('data', (c: Buffer) => (err += c.toString()));
          const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
          child.on('exit', (code) => {
            clearTimeout(timer);
            const line = out.split('\n').find((l) => l.startsWith('RESULT '));
            if (code === 0 && line) resolve(JSON.parse(line.slice(7)));
            else reject(new Error(`rank ${rank} exited with ${code}\n${err.slice(-2000)}`));
          });
        }),
    ),
  );
}

describe('differentiable collectives across real processes', () => {
  it('give the same input gradients as the in-process fake group', async () => {
    const expected = await Promise.all(fakeWorld(WORLD).map((g) => runCases(g)));
    const ranks = await runRanks(60_000);
    for (const { rank, grads } of ranks) {
      for (const [name, want] of Object.entries(expected[rank]!)) expectAllClose(grads[name]!, want, 5);
    }
  }, 90_000);
});

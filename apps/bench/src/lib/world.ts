import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { findFreePort } from '@ddp/launch';

/** How long the other ranks may run on once one has ended. */
const STRAGGLER_MS = 60_000;

/** How a benchmark rank process reports a figure: one `SAMPLE {json}` line on stdout. */
export const SAMPLE_PREFIX = 'SAMPLE ';

export function printSample(sample: unknown): void {
  console.log(`${SAMPLE_PREFIX}${JSON.stringify(sample)}`);
}

/**
 * Starts `world` processes of `cmd args` with the torchrun environment (a fresh port and
 * secret; works for our ranks and for PyTorch's) and resolves with each rank's samples.
 * `wrap` prefixes a rank's command (e.g. `ip netns exec` to put it on another "host").
 * Rejects, naming the rank, when one exits non-zero, outlives `timeoutMs`, or runs on a minute
 * after another ended (then killed).
 */
export async function runSampleWorld<T>(
  world: number,
  cmd: string,
  args: string[],
  opts: {
    env?: Record<string, string>;
    timeoutMs?: number;
    masterAddr?: string;
    wrap?: (rank: number) => string[];
  } = {},
): Promise<T[][]> {
  const port = String(await findFreePort());
  const secret = randomBytes(16).toString('hex');
  const timeoutMs = opts.timeoutMs ?? 900_000;
  const running = new Set<ReturnType<typeof spawn>>();
  // a rank still running this long after another ended is stuck (a PyTorch twin once spun 9 minutes in Gloo's
  // teardown after its peer had exited): killed, so the bench fails naming it instead of waiting out the timeout
  const endStragglers = () =>
    setTimeout(() => {
      for (const c of running) c.kill('SIGKILL');
    }, STRAGGLER_MS).unref();
  return Promise.all(
    Array.from(
      { length: world },
      (_, rank) =>
        new Promise<T[]>((resolve, reject) => {
          const env = {
            ...process.env,
            ...opts.env,
            RANK: `${rank}`,
            LOCAL_RANK: `${rank}`,
            WORLD_SIZE: `${world}`,
            LOCAL_WORLD_SIZE: `${world}`,
            MASTER_ADDR: opts.masterAddr ?? '127.0.0.1',
            MASTER_PORT: port,
            DDP_SECRET: secret,
          };
          const [bin, ...rest] = [...(opts.wrap?.(rank) ?? []), cmd, ...args];
          const child = spawn(bin, rest, { env, stdio: ['ignore', 'pipe', 'pipe'] });
          running.add(child);
          const samples: T[] = [];
          let pending = '';
          let err = '';
          const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
          child.stdout.on('data', (c: Buffer) => {
            const lines = (pending + c.toString()).split('\n');
            pending = lines.pop() ?? '';
            for (const l of lines)
              if (l.startsWith(SAMPLE_PREFIX)) samples.push(JSON.parse(l.slice(SAMPLE_PREFIX.length)) as T);
          });
          child.stderr.on('data', (c: Buffer) => {
            err = (err + c.toString()).slice(-4000);
          });
          child.on('close', (code, signal) => {
            clearTimeout(timer);
            running.delete(child);
            if (running.size > 0) endStragglers();
            if (code === 0) resolve(samples);
            else reject(new Error(`${cmd} rank ${rank}/${world} ended with ${signal ?? code}\n${err.slice(-2000)}`));
          });
        }),
    ),
  );
}

/** PyTorch's version when /usr/bin/python3 imports torch with Gloo (the peer we compare with), else null. */
export function glooTorchVersion(): string | null {
  const r = spawnSync(
    '/usr/bin/python3',
    ['-c', 'import torch, torch.distributed as d; print(torch.__version__, d.is_gloo_available())'],
    { encoding: 'utf8' },
  );
  return r.status === 0 && r.stdout.includes('True') ? (r.stdout.trim().split(' ')[0] ?? 'torch') : null;
}

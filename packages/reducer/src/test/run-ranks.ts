// Test-only: starts one real process per rank on rank.child.ts and collects each scenario's result.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export type ScenarioResult = Record<string, unknown> & { error?: { name: string; message: string } };
/** Per rank: scenario name → its result. */
export type WorldResult = Record<string, ScenarioResult>[];

/**
 * Runs the named scenarios, in order, in one world of `world` ranks (rank 0's store on `port`). Resolves when every
 * rank exited (any exit code: a scenario may end its rank on purpose); a rank still
 * running after timeoutMs is killed and reported.
 */
export async function runWorld(port: number, world: number, scenarios: string[], timeoutMs = 60_000, env: Record<string, string> = {}): Promise<WorldResult> {
  const script = fileURLToPath(new URL('./rank.child.ts', import.meta.url));
  return Promise.all(
    [...Array(world).keys()].map(
      (rank) =>
        new Promise<Record<string, ScenarioResult>>((resolve) => {
          const child = spawn(process.execPath, ['--conditions=@ddp/source', '--import', 'tsx', script, ...scenarios], {
            env: {
              ...process.env,
              ...env,
              RANK: `${rank}`,
              WORLD_SIZE: `${world}`,
              LOCAL_RANK: `${rank}`,
              LOCAL_WORLD_SIZE: `${world}`,
              MASTER_ADDR: '127.0.0.1',
              MASTER_PORT: `${port}`,
              DDP_SECRET: 'reducer-test',
            },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          let out = '';
          let err = '';
          child.stdout.on('data', (c: Buffer) => (out += c.toString()));
          child.stderr.on('data', (c: Buffer) => (err += c.toString()));
          const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
          child.on('exit', (code, signal) => {
            clearTimeout(timer);
            const results: Record<string, ScenarioResult> = {};
            for (const line of out.split('\n')) {
              const m = /^RESULT (\S+) (.*)$/.exec(line);
              if (m) results[m[1]!] = JSON.parse(m[2]!) as ScenarioResult;
            }
            results.__exit = { code, signal, stderr: err.slice(-3000) };
            resolve(results);
          });
        }),
    ),
  );
}

import { CommError, destroyProcessGroup, initProcessGroup, newGroup, type ProcessGroup } from '../index.js';
import { BAD_CALLS, MISMATCHES } from './mismatches.js';

/**
 * One world of 3 ranks runs each named case (argv) on a fresh group of all three, then a
 * barrier on that group ('<case>/after'), and reports both per rank as RESULT lines:
 *   <mismatch name> – the ranks call collectives that differ (mismatches.ts)
 *   <bad call name> – rank 1's call is invalid; it catches the error and goes on (mismatches.ts)
 *   destroyed       – rank 0 destroys the world and all-reduces; the others all-reduce
 *   inflight        – rank 0 starts a large all-reduce, then destroys the world while the op
 *                     waits for the others, which all-reduce 1 s later
 * A final all-reduce on the world group ('world') shows the other groups were not touched.
 */
const report = (r: Record<string, unknown>) => console.log(`RESULT ${JSON.stringify(r)}`);
function describeError(e: unknown): Record<string, unknown> {
  if (!(e instanceof CommError)) return { name: 'other', message: String(e) };
  const cause = e.cause instanceof Error ? { name: e.cause.name, message: e.cause.message } : undefined;
  return { name: e.name, message: e.message, ranks: e.ranks, cause };
}
async function attempt(phase: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
    report({ phase, name: 'ok' });
  } catch (e) {
    report({ phase, ...describeError(e) });
  }
}

const world = await initProcessGroup({ timeoutMs: 60_000 });
const me = world.rank;
for (const name of process.argv.slice(2)) {
  const g = (await newGroup([0, 1, 2], { timeoutMs: 10_000 })) as ProcessGroup;
  if (name === 'destroyed') {
    if (me === 0) await destroyProcessGroup();
    await attempt(name, () => g.allReduce(new Float32Array(5)).wait());
    if (me === 0) process.exit(0);
    continue;
  }
  if (name === 'inflight') {
    if (me === 0) {
      const op = g.allReduce(new Float32Array(1 << 20)).wait();
      await destroyProcessGroup();
      await attempt(name, () => op);
      process.exit(0);
    }
    await new Promise((r) => setTimeout(r, 1_000));
    await attempt(name, () => g.allReduce(new Float32Array(1 << 20)).wait());
    continue;
  }
  const call = (MISMATCHES[name] ?? BAD_CALLS[name]) as (g: ProcessGroup) => Promise<unknown>;
  await attempt(name, () => call(g));
  await attempt(`${name}/after`, () => g.barrier().wait());
}
await attempt('world', () => world.allReduce(new Float32Array(5)).wait());
await destroyProcessGroup();

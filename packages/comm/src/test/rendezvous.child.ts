import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { CommError, destroyProcessGroup, initProcessGroup } from '../index.js';

/**
 * Rendezvous scenarios (argv[2]); each rank prints RESULT lines.
 *   init         – initProcessGroup, then one all-reduce of rank + 1
 *   hold <file>  – the same, then waits for <file> to exist and all-reduces again (keeps the
 *                  world's store and listeners up while a test starts another world)
 *   again <n>    – n worlds in a row: init, one all-reduce, destroy; reports the sums
 * RDZV_TIMEOUT_MS: initProcessGroup's timeout (default 20 s).
 */
const [mode, stopFile] = process.argv.slice(2);
const report = (r: Record<string, unknown>) => console.log(`RESULT ${JSON.stringify(r)}`);

const sumOfRanks = async (pg: Awaited<ReturnType<typeof initProcessGroup>>): Promise<number> => {
  const a = new Float32Array([pg.rank + 1]);
  await pg.allReduce(a).wait();
  return a[0];
};

if (mode === 'again') {
  const sums: number[] = [];
  try {
    for (let i = 0; i < Number(stopFile); i++) {
      sums.push(await sumOfRanks(await initProcessGroup({ timeoutMs: 20_000 })));
      await destroyProcessGroup();
    }
    report({ phase: 'again', name: 'ok', sums });
  } catch (e) {
    report({ phase: 'again', name: (e as Error).name, message: (e as Error).message, sums });
  }
  process.exit(0);
}

let pg: Awaited<ReturnType<typeof initProcessGroup>>;
try {
  pg = await initProcessGroup({ timeoutMs: Number(process.env.RDZV_TIMEOUT_MS ?? 20_000) });
  report({ phase: 'init', name: 'ok', sum: await sumOfRanks(pg) });
} catch (e) {
  const err = e instanceof CommError ? e : new CommError(String(e));
  report({ phase: 'init', name: e instanceof CommError ? e.name : 'other', message: err.message, ranks: err.ranks });
  process.exit(0);
}
if (mode === 'hold') {
  for (let i = 0; i < 600 && !existsSync(stopFile); i++) await sleep(50);
  report({ phase: 'after', name: 'ok', sum: await sumOfRanks(pg) });
}
await destroyProcessGroup();

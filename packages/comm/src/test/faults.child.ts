import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { CommError, destroyProcessGroup, getStore, initProcessGroup, sharedArray } from '../index.js';
import { decodeText } from '../store/store.js';

/**
 * Fault scenarios, one per mode (argv[2]); each rank prints RESULT lines.
 *   kill      – loops large allReduces (argv[3] 'small': 4 KiB ones, the fast path); the test kills one
 *               rank; survivors report the error
 *   mismatch  – the last rank calls allGather while the others call allReduce
 *   count     – rank 0 all-reduces one more element than the others (ring-sized)
 *   route     – rank 0 all-reduces 5 elements (main thread), the others 300000 (comm thread)
 *   timeout   – the last rank sleeps instead of calling a (ring-sized) allReduce
 *   fuzz      – rank 0 sends random bytes to every listening port, then the world all-reduces
 *   auth      – initProcessGroup only (the test gives one rank a wrong secret)
 */
const mode = process.argv[2];
const report = (r: Record<string, unknown>) => console.log(`RESULT ${JSON.stringify(r)}`);
const describeError = (e: unknown) =>
  e instanceof CommError
    ? { name: e.name, message: e.message, ranks: e.ranks, at: Date.now() }
    : { name: 'other', message: String(e), ranks: [], at: Date.now() };

let pg: Awaited<ReturnType<typeof initProcessGroup>>;
try {
  pg = await initProcessGroup({ timeoutMs: mode === 'timeout' ? 2000 : mode === 'auth' ? 4000 : 20_000 });
} catch (e) {
  report({ phase: 'init', ...describeError(e) });
  process.exit(0);
}
const last = pg.size - 1;

async function attempt(what: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
    report({ phase: what, name: 'ok' });
  } catch (e) {
    report({ phase: what, ...describeError(e) });
  }
}

switch (mode) {
  case 'auth':
    report({ phase: 'init', name: 'ok' });
    break;
  case 'kill': {
    const buf = process.argv[3] === 'small' ? sharedArray(Float32Array, 1024) : new Float32Array(4 * 1024 * 1024);
    report({ phase: 'started', name: 'ok' });
    await attempt('loop', async () => {
      for (let i = 0; i < 100_000; i++) await pg.allReduce(buf).wait();
    });
    // let the other survivors detect the victim themselves before this rank goes away
    await sleep(2000);
    process.exit(0);
    break;
  }
  case 'mismatch':
    await attempt('collective', () =>
      pg.rank === last ? pg.allGather(new Float32Array(5)).wait() : pg.allReduce(new Float32Array(5)).wait(),
    );
    await attempt('after', () => pg.barrier().wait());
    break;
  case 'count':
    await attempt('collective', () => pg.allReduce(new Float32Array(pg.rank === 0 ? 300_001 : 300_000)).wait());
    break;
  case 'route':
    await attempt('collective', () => pg.allReduce(new Float32Array(pg.rank === 0 ? 5 : 300_000)).wait());
    await attempt('after', () => pg.allReduce(new Float32Array(5)).wait());
    break;
  case 'timeout':
    if (pg.rank === last) await sleep(4000);
    else await attempt('collective', () => pg.allReduce(new Float32Array(300_000)).wait());
    // stay to answer the other ranks' probes
    await sleep(1500);
    break;
  case 'fuzz': {
    if (pg.rank === 0) {
      const targets: ({ host: string; port: number } | { path: string })[] = [
        { host: process.env.MASTER_ADDR as string, port: Number(process.env.MASTER_PORT) },
      ];
      for (let r = 0; r < pg.size; r++) {
        for (const key of ['addr', 'mainaddr']) {
          const a = JSON.parse(decodeText(await getStore().get(`ddp/0/${key}/${r}`)));
          targets.push({ host: a.host, port: a.port });
          if (a.uds) targets.push({ path: a.uds });
        }
      }
      const junks = [
        randomBytes(1),
        randomBytes(64),
        randomBytes(70_000),
        Buffer.from('DDPH\x01\x02\x00\x00\x00\x00'),
        Buffer.alloc(26, 0xff),
      ];
      let sent = 0;
      for (const t of targets) {
        for (const junk of junks) {
          await new Promise<void>((resolve) => {
            const s = connect(t, () => {
              s.write(junk);
              sent++;
              setTimeout(() => s.destroy(), 20);
            });
            s.on('error', () => resolve());
            s.on('close', () => resolve());
          });
        }
      }
      report({ phase: 'fuzzed', name: 'ok', targets: targets.length, sent });
    }
    await attempt('collective', async () => {
      const a = new Float32Array([pg.rank + 1]);
      await pg.allReduce(a).wait();
      if (a[0] !== (pg.size * (pg.size + 1)) / 2) throw new Error(`wrong sum ${a[0]}`);
      const big = new Float32Array(1 << 20).fill(1);
      await pg.allReduce(big).wait();
      if (big[12345] !== pg.size) throw new Error(`wrong big sum ${big[12345]}`);
    });
    break;
  }
}
await destroyProcessGroup();

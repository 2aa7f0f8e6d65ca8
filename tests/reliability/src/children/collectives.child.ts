import { destroyProcessGroup, initProcessGroup, readLaunchEnv, type Store, TCPStore } from '@ddp/comm';
import { RelayedStore } from '../relayed-store.js';
import { collectiveSuite, describeError } from '../suite.js';

/**
 * A rank running the collective suite. Args: `suite <rounds>` runs it `rounds` times and
 * reports failures; `idle` runs it once, then reports `idle`, waits 1.5 s and reports how the next suite ends; `loop [--exit-code]` runs it until an error, reports the error, and
 * exits 0 (or 1 with --exit-code, so ddp-run sees a failure).
 * With RELAY_CONTROL (host:port of a FaultRelay's control listener) and STORE_FRONT
 * (host:port of its route to the store server) the store and every peer connection pass
 * through the relay; otherwise the world meets as usual (MASTER_ADDR/PORT).
 */
const env = readLaunchEnv();
const [mode, rounds = '1'] = process.argv.slice(2);
const hostPort = (v: string | undefined) => {
  const [host, port] = (v ?? '').split(':');
  return { host: host as string, port: Number(port) };
};
const timeoutMs = Number(process.env.DDP_TIMEOUT_MS) || 10_000;
let inner: Store | undefined;
let store: Store | undefined;
if (process.env.RELAY_CONTROL) {
  inner = await TCPStore.create({ ...hostPort(process.env.STORE_FRONT), secret: env.secret, timeoutMs, rank: env.rank });
  store = new RelayedStore(inner, hostPort(process.env.RELAY_CONTROL));
}
const pg = await initProcessGroup({ store, rank: env.rank, worldSize: env.worldSize, timeoutMs });
console.log('RESULT {"ready":true}');
let salt = 0;
let code = 0;
try {
  if (mode === 'idle') {
    // one suite, then report idle and wait (heartbeats only) until a fault ends the world
    await collectiveSuite(pg, ++salt, [7]);
    console.log('RESULT {"idle":true}');
    try {
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await collectiveSuite(pg, ++salt);
      console.log(`RESULT ${JSON.stringify({ error: null })}`);
    } catch (e) {
      console.log(`RESULT ${JSON.stringify(describeError(e))}`);
    }
  } else if (mode === 'suite') {
    const failures: string[] = [];
    for (let i = 0; i < Number(rounds); i++) failures.push(...(await collectiveSuite(pg, ++salt)));
    console.log(`RESULT ${JSON.stringify({ failures, rounds: salt })}`);
  } else {
    const started = Date.now();
    try {
      for (let i = 0; i < 100_000; i++) await collectiveSuite(pg, ++salt, [7, 4096]);
      console.log(`RESULT ${JSON.stringify({ error: null })}`);
    } catch (e) {
      console.log(`RESULT ${JSON.stringify({ ...describeError(e), afterMs: Date.now() - started, rounds: salt })}`);
      if (process.argv.includes('--exit-code')) code = 1;
    }
  }
} finally {
  // a poisoned world may not say goodbye cleanly: do not let that hold the exit
  await Promise.race([destroyProcessGroup().catch(() => {}), new Promise((r) => setTimeout(r, 3000).unref())]);
  if (inner) await Promise.race([inner.close().catch(() => {}), new Promise((r) => setTimeout(r, 1000).unref())]);
}
process.exit(code);

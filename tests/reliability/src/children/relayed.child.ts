import { destroyProcessGroup, initProcessGroup, readLaunchEnv, TCPStore } from '@ddp/comm';
import { RelayedStore } from '../relayed-store.js';
import { collectiveSuite, describeError } from '../suite.js';

/**
 * A rank whose store and peer connections all pass through a FaultRelay.
 * Env: RELAY_CONTROL (host:port of the relay's control listener), STORE_FRONT (host:port
 * of the relay's route to the store server). Args: `suite <rounds>` runs the collective
 * suite `rounds` times and reports failures; `loop` runs it until an error and reports it.
 */
const env = readLaunchEnv();
const [mode, rounds = '1'] = process.argv.slice(2);
const hostPort = (v: string | undefined) => {
  const [host, port] = (v ?? '').split(':');
  return { host: host as string, port: Number(port) };
};
const timeoutMs = Number(process.env.DDP_TIMEOUT_MS) || 10_000;
const front = hostPort(process.env.STORE_FRONT);
const inner = await TCPStore.create({ ...front, secret: env.secret, timeoutMs, rank: env.rank });
const store = new RelayedStore(inner, hostPort(process.env.RELAY_CONTROL));
const pg = await initProcessGroup({ store, rank: env.rank, worldSize: env.worldSize, timeoutMs });
console.log('RESULT {"ready":true}');
let salt = 0;
try {
  if (mode === 'suite') {
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
    }
  }
} finally {
  // a poisoned world may not say goodbye cleanly: do not let that hold the exit
  await Promise.race([destroyProcessGroup().catch(() => {}), new Promise((r) => setTimeout(r, 3000).unref())]);
  await Promise.race([inner.close().catch(() => {}), new Promise((r) => setTimeout(r, 1000).unref())]);
}
process.exit(0);

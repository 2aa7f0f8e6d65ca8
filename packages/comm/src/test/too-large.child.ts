import { destroyProcessGroup, initProcessGroup, sharedArray } from '../index.js';

/**
 * Arrays over 4 GiB (their pages never touched): what each op says. Prints RESULT { op: 'ok' | error }.
 */
const pg = await initProcessGroup({ timeoutMs: 60_000 });
const n = 2 ** 30 + 1;
const outcome = (run: () => { wait(): Promise<unknown> }) =>
  Promise.resolve()
    .then(() => run().wait())
    .then(
      () => 'ok',
      (e: Error) => `${e.name}: ${e.message}`,
    );
const plain = new Float32Array(n);
const out = {
  allReducePlain: await outcome(() => pg.allReduce(plain)),
  broadcastShared: await outcome(() => pg.broadcast(sharedArray(Float32Array, n), { src: 0 })),
};
console.log(`RESULT ${JSON.stringify(out)}`);
await destroyProcessGroup();

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import type { Dtype, HalfDtype } from '../dtypes.js';
import { destroyProcessGroup, initProcessGroup } from '../index.js';
import { firstDiff, generate, makeArray, OPS, reference } from './reference.js';

/**
 * Reduce-scatters, each followed by an all-gather of its outputs, whose results a run on one
 * host and a run across hosts (the hierarchical path) must give bit for bit: exact inputs
 * (reference.ts) in every dtype and op, per-rank chunks of a direct and a ring size. And the
 * bytes a float32 reduce-scatter and an all-gather put on the link: this "host"'s network
 * interfaces other than lo (a network namespace sees only its own), read between barriers.
 * Prints RESULT { exact, wrong, link }.
 */
const pg = await initProcessGroup({ timeoutMs: 120_000 });
const ranks = Array.from({ length: pg.size }, (_, r) => r);
const digest = (a: ArrayBufferView) =>
  createHash('sha256')
    .update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength))
    .digest('hex')
    .slice(0, 16);
const txBytes = () =>
  readdirSync('/sys/class/net')
    .filter((i) => i !== 'lo')
    .reduce((s, i) => s + Number(readFileSync(`/sys/class/net/${i}/statistics/tx_bytes`, 'utf8')), 0);
const exact: Record<string, string> = {};
const wrong: string[] = [];
const link: Record<string, number> = {};
let salt = 0;
const CHUNKS = { direct: 1000, ring: 1 << 17 };
for (const [path, n] of Object.entries(CHUNKS)) {
  for (const d of ['float32', 'float64', 'int32', 'float16'] as Dtype[]) {
    for (const op of OPS) {
      const input = generate(d, pg.rank, n * pg.size, ++salt);
      const output = makeArray(d, n);
      const gathered = makeArray(d, n * pg.size);
      const dtype = d === 'float16' ? { dtype: d as HalfDtype } : {};
      await pg.reduceScatter(output, input, { op, ...dtype }).wait();
      await pg.allGatherInto(gathered, output, dtype).wait();
      const key = `${path}/${d}/${op}`;
      exact[key] = digest(gathered);
      if (firstDiff(gathered, reference(d, op, ranks, n * pg.size, salt)) !== -1) wrong.push(key);
    }
  }
}
/**
 * What this host sent on its link while `op` ran: read after a barrier, with a barrier before
 * the op (so no peer starts before every reading) and after it (so every byte has left).
 */
async function linkBytes(op: () => Promise<unknown>): Promise<number> {
  await pg.barrier().wait();
  const t0 = txBytes();
  await pg.barrier().wait();
  await op();
  await pg.barrier().wait();
  return txBytes() - t0;
}

// link bytes: the least of 3 windows (retransmissions only add)
for (const [path, n] of Object.entries(CHUNKS)) {
  const input = new Float32Array(n * pg.size).fill(1);
  const output = new Float32Array(n);
  const gathered = new Float32Array(n * pg.size);
  const least = (key: string, v: number) => {
    link[key] = Math.min(link[key] ?? Number.POSITIVE_INFINITY, v);
  };
  for (let round = 0; round < 3; round++) {
    least(`${path}/reduceScatter`, await linkBytes(() => pg.reduceScatter(output, input).wait()));
    least(`${path}/allGather`, await linkBytes(() => pg.allGatherInto(gathered, output).wait()));
  }
}
console.log(`RESULT ${JSON.stringify({ exact, wrong, link })}`);
await destroyProcessGroup();

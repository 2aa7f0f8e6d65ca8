import type { CommArray, Dtype, HalfDtype } from '../dtypes.js';
import { destroyProcessGroup, initProcessGroup, type ProcessGroup } from '../index.js';
import { Checker } from './checker.js';
import { DTYPES, generate, makeArray, OPS, reference } from './reference.js';

/**
 * Every collective, op and dtype at sizes 0, 1 and 7 (and, with --large, 17 MiB float32
 * and float16), checked against local references. Args: [--large]
 */
const large = process.argv.includes('--large');
const pg = await initProcessGroup({ timeoutMs: 60_000 });
const c = new Checker();
const ranks = Array.from({ length: pg.size }, (_, r) => r);
const half = (d: Dtype) => (d === 'float16' || d === 'bfloat16' ? { dtype: d as HalfDtype } : {});
let salt = 0;

async function suite(g: ProcessGroup, d: Dtype, n: number, full: boolean): Promise<void> {
  const me = g.rank;
  const tag = `${d}×${n} (size ${g.size})`;
  for (const op of full ? OPS : (['sum'] as const)) {
    const s = ++salt;
    const a = generate(d, me, n, s);
    await g.allReduce(a, { op, ...half(d) }).wait();
    c.equal(`allReduce ${op} ${tag}`, d, a, reference(d, op, ranks, n, s));
  }
  // with large sizes, the gathered/scattered whole is n elements (not n per rank)
  const per = full ? n : Math.floor(n / g.size);
  {
    const s = ++salt;
    const out = makeArray(d, per);
    const input = generate(d, me, per * g.size, s);
    await g.reduceScatter(out, input, { op: 'sum', ...half(d) }).wait();
    c.equal(`reduceScatter ${tag}`, d, out, reference(d, 'sum', ranks, per * g.size, s).subarray(me * per, (me + 1) * per));
  }
  for (const src of full ? ranks : [g.size - 1]) {
    const s = ++salt;
    const a = me === src ? generate(d, src, n, s) : makeArray(d, n);
    await g.broadcast(a, { src, ...half(d) }).wait();
    c.equal(`broadcast src ${src} ${tag}`, d, a, generate(d, src, n, s));
  }
  {
    const s = ++salt;
    const out = makeArray(d, per * g.size);
    await g.allGatherInto(out, generate(d, me, per, s), half(d)).wait();
    ranks.forEach((r) => c.equal(`allGatherInto slot ${r} ${tag}`, d, out.subarray(r * per, (r + 1) * per), generate(d, r, per, s)));
  }
  if (!full) return;
  {
    // unequal sizes: rank r contributes n + r elements
    const s = ++salt;
    const got = await g.allGather(generate(d, me, n + me, s), half(d)).wait();
    ranks.forEach((r) => c.equal(`allGather unequal from ${r} ${tag}`, d, got[r] as CommArray, generate(d, r, n + r, s)));
  }
  {
    const s = ++salt;
    const dst = g.size - 1;
    const a = generate(d, me, n, s);
    await g.reduce(a, { dst, op: 'max', ...half(d) }).wait();
    c.equal(`reduce max dst ${dst} ${tag}`, d, a, me === dst ? reference(d, 'max', ranks, n, s) : generate(d, me, n, s));
  }
  {
    const s = ++salt;
    const got = await g.gather(generate(d, me, n + 2 * me, s), { dst: 0, ...half(d) }).wait();
    if (me === 0) ranks.forEach((r) => c.equal(`gather from ${r} ${tag}`, d, (got as CommArray[])[r] as CommArray, generate(d, r, n + 2 * r, s)));
    else c.ok(`gather on non-dst returns null ${tag}`, got === null);
  }
  {
    const s = ++salt;
    const src = 1 % g.size;
    const out = makeArray(d, n);
    const inputs = me === src ? ranks.map((r) => generate(d, 100 + r, n, s)) : undefined;
    await g.scatter(out, { src, inputs, ...half(d) }).wait();
    c.equal(`scatter from ${src} ${tag}`, d, out, generate(d, 100 + me, n, s));
  }
  {
    // rank i sends n + i + j elements to rank j, generated from (i, j)
    const s = ++salt;
    const inputs = ranks.map((j) => generate(d, me * 10 + j, n + me + j, s));
    const outputs = ranks.map((j) => makeArray(d, n + j + me));
    await g.allToAll(outputs, inputs, half(d)).wait();
    ranks.forEach((j) => c.equal(`allToAll from ${j} ${tag}`, d, outputs[j] as CommArray, generate(d, j * 10 + me, n + j + me, s)));
  }
  {
    // ring of sends: to the right, from the left, as one batch
    const s = ++salt;
    const right = (me + 1) % g.size;
    const left = (me + g.size - 1) % g.size;
    if (g.size > 1) {
      const got = makeArray(d, n);
      await g.batchIsendIrecv([
        { op: 'isend', buf: generate(d, me, n, s), peer: right, tag: 3, ...half(d) },
        { op: 'irecv', buf: got, peer: left, tag: 3, ...half(d) },
      ]).wait();
      c.equal(`isend/irecv ring ${tag}`, d, got, generate(d, left, n, s));
      if (me === 0) await g.send(generate(d, 0, n, s), 1, 0, half(d)).wait();
      if (me === 1) {
        const b = makeArray(d, n);
        await g.recv(b, 0, 0, half(d)).wait();
        c.equal(`send/recv ${tag}`, d, b, generate(d, 0, n, s));
      }
    }
  }
  await g.barrier().wait();
}

for (const d of DTYPES) for (const n of [0, 1, 7]) await suite(pg, d, n, true);
if (large) {
  const n = (17 * 1024 * 1024) / 4;
  await suite(pg, 'float32', n, false);
  await suite(pg, 'float16', n * 2, false);
}
c.report({ rank: pg.rank });
await destroyProcessGroup();

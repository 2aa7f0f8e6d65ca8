import { createHash } from 'node:crypto';
import { fromTf, tidy } from '@ddp/autograd';
import type { CommArray, ProcessGroup, Work } from '@ddp/comm';
import { Generator, Linear, mse, Sequential, SGD, Tanh } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';
import { tf } from '@ddp/tensor';
import { seededRandom } from '../relay.js';
import { type Sample, slopes } from '../slope.js';
import { value } from '../suite.js';
import { connectWorld } from './connect.js';

/**
 * Soak: `<collectives> <ddpSteps>` random small collectives (8 in flight, each checked bit
 * for bit against a local reference), then DDP steps of a tiny MLP; samples RSS, heap
 * (after a forced GC when --expose-gc is on) and tf.memory().numTensors, and reports the
 * least-squares slopes after warm-up, whether the ranks' final parameters are identical and
 * their SHA-256. The world may sit behind a FaultRelay (see connect.ts).
 */
const [collectives = 2000, ddpSteps = 100] = process.argv
  .slice(2)
  .filter((a) => !a.startsWith('--'))
  .map(Number);
const { pg, close } = await connectWorld(Number(process.env.DDP_TIMEOUT_MS) || 60_000);
const gc = (globalThis as { gc?: () => void }).gc;

function sample(op: number): Sample {
  gc?.();
  const m = process.memoryUsage();
  return { op, rss: m.rss, heapUsed: m.heapUsed, numTensors: tf.memory().numTensors };
}

const fill = (rank: number, n: number, salt: number, offset = 0) =>
  Float32Array.from({ length: n }, (_, i) => value(rank, i + offset, salt));

/** Issues one random collective; `check` runs after it completes and returns false on a mismatch. */
function randomCollective(
  g: ProcessGroup,
  rand: () => number,
  salt: number,
): { work: Work<unknown>; check: () => boolean } {
  const n = 1 + Math.floor(rand() * 64);
  const kind = Math.floor(rand() * 5);
  const { rank, size } = g;
  const ranks = Array.from({ length: size }, (_, r) => r);
  const same = (a: CommArray, b: Float32Array) => a.length === b.length && a.every((v, i) => Object.is(v, b[i]));
  if (kind <= 1) {
    const op = kind === 0 ? 'sum' : 'max';
    const buf = fill(rank, n, salt);
    const want = fill(0, n, salt).map((_, i) =>
      ranks.map((r) => value(r, i, salt)).reduce((a, b) => (op === 'sum' ? a + b : Math.max(a, b))),
    );
    return { work: g.allReduce(buf, { op }), check: () => same(buf, want) };
  }
  if (kind === 2) {
    const work = g.allGather(fill(rank, n, salt));
    return { work, check: () => true };
  }
  if (kind === 3) {
    const root = Math.floor(rand() * size);
    const buf = rank === root ? fill(root, n, salt) : new Float32Array(n);
    return { work: g.broadcast(buf, { src: root }), check: () => same(buf, fill(root, n, salt)) };
  }
  const out = new Float32Array(n);
  const want = Float32Array.from({ length: n }, (_, i) => ranks.reduce((a, r) => a + value(r, i + rank * n, salt), 0));
  return { work: g.reduceScatter(out, fill(rank, n * size, salt), { op: 'sum' }), check: () => same(out, want) };
}

async function soakCollectives(count: number): Promise<{ mismatches: number; samples: Sample[] }> {
  const rand = seededRandom(4242); // same sequence on every rank
  const every = Math.max(1, Math.floor(count / 40));
  const samples: Sample[] = [];
  let mismatches = 0;
  for (let i = 0; i < count; i += 8) {
    const batch = Array.from({ length: Math.min(8, count - i) }, (_, k) => randomCollective(pg, rand, i + k));
    const results = await Promise.all(batch.map((b) => b.work.wait()));
    batch.forEach((b, k) => {
      if (!b.check()) mismatches++;
      // allGather: every block must be the sender's data
      const r = results[k];
      if (Array.isArray(r) && !r.every((block: CommArray, src) => block.every((v, j) => v === value(src, j, i + k))))
        mismatches++;
    });
    if ((i / 8) % Math.max(1, Math.floor(every / 8)) === 0) samples.push(sample(i + batch.length));
  }
  return { mismatches, samples };
}

/** Averages one parameter's gradient over the world in place (the --no-ddp baseline). */
async function allReduceGrad(p: { grad: tf.Tensor | null | { dataSync(): unknown } }): Promise<void> {
  const g = p.grad as unknown as { dataSync(): Float32Array } | null;
  if (!g) return;
  const buf = Float32Array.from(g.dataSync());
  await pg.allReduce(buf, { op: 'avg' }).wait();
}

async function soakDdp(
  steps: number,
): Promise<{ samples: Sample[]; paramsIdentical: boolean; finalLoss: number; paramsSha256: string }> {
  const gen = new Generator(7);
  const model = new Sequential(
    new Linear(8, 32, { generator: gen }),
    new Tanh(),
    new Linear(32, 4, { generator: gen }),
  );
  // --no-ddp: the same loop with gradients averaged by hand (to tell DDP's memory from the rest)
  const plain = process.argv.includes('--no-ddp');
  const ddp = plain ? null : await DistributedDataParallel.create(model, { bucketCapMB: 0.002, firstBucketMB: 0.001 });
  const opt = new SGD(model.parameters(), { lr: 0.05, momentum: 0.9 });
  const data = new Generator(99);
  const X = tf.tensor(data.normal(12 * 8), [12, 8]);
  const Y = tf.tensor(data.normal(12 * 4), [12, 4]);
  const per = 12 / pg.size;
  const samples: Sample[] = [];
  let finalLoss = Number.NaN;
  for (let s = 0; s < steps; s++) {
    const x = fromTf(tf.slice(X, [pg.rank * per], [per]));
    const y = fromTf(tf.slice(Y, [pg.rank * per], [per]));
    const loss = tidy(() => mse(ddp ? ddp.forward(x) : model.forward(x), y));
    await loss.backward();
    if (!ddp) for (const p of model.parameters()) await allReduceGrad(p);
    if (s === steps - 1) finalLoss = loss.dataSync()[0];
    loss.dispose();
    x.dispose();
    y.dispose();
    opt.step();
    opt.zeroGrad();
    if (s % Math.max(1, Math.floor(steps / 40)) === 0) samples.push(sample(s + 1));
  }
  // bit-identical parameters on every rank
  const flat = Float32Array.from(model.parameters().flatMap((p) => [...(p.dataSync() as Float32Array)]));
  const all = (await pg.allGather(flat).wait()) as Float32Array[];
  const bits = (a: Float32Array) => new Uint32Array(a.buffer, a.byteOffset, a.length);
  const paramsIdentical = all.every((a) => bits(a).every((w, i) => w === bits(all[0] as Float32Array)[i]));
  tf.dispose([X, Y]);
  opt.dispose();
  const paramsSha256 = createHash('sha256').update(new Uint8Array(flat.buffer)).digest('hex');
  return { samples, paramsIdentical, finalLoss, paramsSha256 };
}

const c = await soakCollectives(collectives);
const d = await soakDdp(ddpSteps);
console.log(
  `RESULT ${JSON.stringify({
    collectives,
    ddpSteps,
    gcForced: gc !== undefined,
    mismatches: c.mismatches,
    collectiveSlopes: slopes(c.samples),
    ddpSlopes: slopes(d.samples),
    paramsIdentical: d.paramsIdentical,
    paramsSha256: d.paramsSha256,
    finalLoss: d.finalLoss,
    rssStart: c.samples[0]?.rss,
    rssEnd: d.samples.at(-1)?.rss,
  })}`,
);
await close();

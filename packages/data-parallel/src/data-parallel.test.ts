import { concat, mse, noGrad, tensor } from '@ddp/autograd';
import { Generator, type Module, SGD } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { afterEach, describe, expect, it } from 'vitest';
import { chunkSizes, DataParallel, DataParallelError } from './index.js';
import { createModule, rowsOfItsOwn, withBatchNorm } from './test/mlp.js';

const factory = new URL('./test/mlp.ts', import.meta.url);
const BATCH = 10;
const batches = (() => {
  const g = new Generator(5);
  return [0, 1, 2].map(() => ({ x: Array.from(g.normal(BATCH * 6)), y: Array.from(g.normal(BATCH * 3)) }));
})();

/** Each parameter's gradient in `got` equals `want`'s to `digits` digits. */
function expectSameGradients(got: Module, want: Module, digits: number): void {
  got.parameters().forEach((p, i) => {
    const ref = want.parameters()[i].grad!.dataSync();
    p.grad!.dataSync().forEach((v, j) => {
      expect(v).toBeCloseTo(ref[j], digits);
    });
  });
}

let dp: DataParallel | null = null;
afterEach(async () => {
  await dp?.dispose();
  dp = null;
});

describe('DataParallel: replicas on worker threads', () => {
  it('3 SGD steps on 3 replicas equal one module on the same global batch (losses, gradients, weights)', async () => {
    const single = createModule();
    const singleOpt = new SGD(single.parameters(), { lr: 0.1 });
    dp = await DataParallel.create(factory, { replicas: 3 });
    const opt = new SGD(dp.module.parameters(), { lr: 0.1 });
    for (const b of batches) {
      const [x, y] = [tensor(b.x, [BATCH, 6]), tensor(b.y, [BATCH, 3])];
      const want = mse(single.forward(x), y);
      await want.backward();
      const got = mse(await dp.forward(x), y);
      await got.backward();
      expect(got.item()).toBeCloseTo(want.item(), 6);
      expectSameGradients(dp.module, single, 6);
      singleOpt.step();
      opt.step();
      singleOpt.zeroGrad();
      opt.zeroGrad();
      for (const t of [x, y, want, got]) t.dispose();
    }
    dp.module.parameters().forEach((p, i) => {
      const ref = single.parameters()[i].data.dataSync();
      p.data.dataSync().forEach((v, j) => {
        expect(v).toBeCloseTo(ref[j], 6);
      });
    });
  });

  it("backward gives each replica its own output's rows where it returns other rows than its chunk (torch's Gather)", async () => {
    // was: tfjs's "The sum of sizes must match the size of the axis dimension" (dy split by the input chunks)
    const single = rowsOfItsOwn();
    dp = await DataParallel.create(factory, { replicas: 3, exportName: 'rowsOfItsOwn' });
    const { x: xs, y: ys } = batches[0];
    const sizes = chunkSizes(BATCH, 3);
    const starts = sizes.map((_, r) => sizes.slice(0, r).reduce((a, b) => a + b, 0));
    const chunkOf = (r: number) => tensor(xs.slice(6 * starts[r], 6 * (starts[r] + sizes[r])), [sizes[r], 6]);
    const wantOut = concat(
      sizes.map((_, r) => single.forward(chunkOf(r))),
      0,
    );
    const y = tensor(ys.slice(0, 6 * 3), [6, 3]);
    const want = mse(wantOut, y);
    await want.backward();
    const x = tensor(xs, [BATCH, 6]);
    const got = mse(await dp.forward(x), y);
    await got.backward();
    expect(got.item()).toBeCloseTo(want.item(), 6);
    expectSameGradients(dp.module, single, 5);
    for (const t of [x, y, want, got, wantOut]) t.dispose();
  });

  it('two forwards before one backward: each backward reaches its own graph, as torch keeps one per forward', async () => {
    // before: each replica kept one output, so the second forward replaced the first's graph: the first's
    // backward ran through the second's (wrong gradients, no error), a loss over both raised
    const single = createModule();
    dp = await DataParallel.create(factory, { replicas: 2 });
    const [a, b] = batches.map((t) => ({ x: tensor(t.x, [BATCH, 6]), y: tensor(t.y, [BATCH, 3]) }));
    await mse(single.forward(a.x), a.y)
      .add(mse(single.forward(b.x), b.y).mul(3))
      .backward();
    const [ya, yb] = [await dp.forward(a.x), await dp.forward(b.x)];
    await mse(ya, a.y).add(mse(yb, b.y).mul(3)).backward();
    dp.module.parameters().forEach((p, i) => {
      const ref = single.parameters()[i].grad!.dataSync();
      p.grad!.dataSync().forEach((v, j) => {
        expect(v).toBeCloseTo(ref[j], 6);
      });
    });
  });

  it('a backward after the parameters changed since its forward raises; the next forward uses the new ones', async () => {
    dp = await DataParallel.create(factory, { replicas: 2 });
    const [x, y] = [tensor(batches[0].x, [BATCH, 6]), tensor(batches[0].y, [BATCH, 3])];
    const stale = mse(await dp.forward(x), y);
    const first = dp.module.parameters()[0];
    first.data = tf.mul(first.data, 2); // what an optimizer step does
    const fresh = await dp.forward(x);
    await expect(stale.backward()).rejects.toThrow(/the parameters changed after that forward/);
    const want = createModule();
    want.parameters()[0].data = tf.mul(want.parameters()[0].data, 2);
    const got = fresh.dataSync();
    want
      .forward(x)
      .dataSync()
      .forEach((v, j) => {
        expect(got[j]).toBeCloseTo(v, 6);
      });
  });

  it('keeps tf.memory().numTensors flat on the main thread across steps', async () => {
    dp = await DataParallel.create(factory, { replicas: 2 });
    const opt = new SGD(dp.module.parameters(), { lr: 0.1 });
    const counts: number[] = [];
    for (let i = 0; i < 4; i++) {
      const b = batches[i % 3];
      const [x, y] = [tensor(b.x, [BATCH, 6]), tensor(b.y, [BATCH, 3])];
      const loss = mse(await dp.forward(x), y);
      await loss.backward();
      opt.step();
      opt.zeroGrad();
      for (const t of [x, y, loss]) t.dispose();
      counts.push(tf.memory().numTensors);
    }
    expect(new Set(counts.slice(1)).size).toBe(1);
  });

  // was: 13 tensors per noGrad forward left on each replica thread, 26 with grad until the next step (probe BA)
  it('evaluation forwards leave nothing behind on the replica threads (noGrad, and with grad unbackwarded)', async () => {
    dp = await DataParallel.create(factory, { replicas: 2, exportName: 'reportsTensors' });
    dp.module.eval();
    const x = tensor(batches[0].x, [BATCH, 6]);
    const counts: string[] = []; // each replica's live tensors during the forward, with grad then under noGrad
    for (let i = 0; i < 6; i++) {
      const out = i % 2 ? await noGrad(() => dp!.forward(x)) : await dp.forward(x);
      counts.push([...new Set(out.data.dataSync())].sort().join('/'));
      out.dispose();
    }
    x.dispose();
    expect(counts.slice(2), `replica tensor counts ${counts}`).toEqual(counts.slice(0, 4));
  });

  it("eval on the main replica is eval on every replica; batch norm's running statistics are replica 0's, as in torch", async () => {
    const expectClose = (got: ArrayLike<number>, want: ArrayLike<number>, what: string) => {
      expect(got.length, what).toBe(want.length);
      for (let j = 0; j < got.length; j++) expect(got[j], `${what}[${j}]`).toBeCloseTo(want[j], 5);
    };
    dp = await DataParallel.create(factory, { replicas: 2, exportName: 'withBatchNorm' });
    const ref = withBatchNorm();
    const x = tensor(batches[0].x, [BATCH, 6]);
    (await dp.forward(x)).dispose();
    // torch's replica on device 0 shares the module's buffers: they moved by its chunk (rows 0-4) only
    const chunk0 = tensor(batches[0].x.slice(0, 5 * 6), [5, 6]);
    ref.forward(chunk0).dispose();
    // before: the main replica's stayed at their initial values (zeros, ones, 0 batches)
    for (const [i, b] of dp.module.buffers().entries())
      expectClose(b.dataSync(), ref.buffers()[i].dataSync(), `buffer ${i}`);
    dp.module.eval();
    const [got, want] = [await dp.forward(x), dp.module.forward(x)];
    // before: the replicas stayed in training mode (batch statistics, dropout) while the main one was in eval
    expectClose(got.dataSync(), want.dataSync(), 'eval output');
    for (const t of [x, chunk0, got, want]) t.dispose();
  });

  it("scatters as torch does: tensor.chunk's sizes, none empty (was: as equal as can be, 4 3 3 for 10 over 3)", () => {
    // torch 1.13: [c.numel() for c in torch.arange(n).chunk(k)]
    const cases: [number, number, number[]][] = [
      [10, 3, [4, 4, 2]],
      [2, 4, [1, 1]],
      [9, 4, [3, 3, 3]],
      [5, 4, [2, 2, 1]],
      [10, 4, [3, 3, 3, 1]],
      [6, 4, [2, 2, 2]],
      [8, 2, [4, 4]],
    ];
    for (const [n, k, want] of cases) expect(chunkSizes(n, k), `${n} over ${k}`).toEqual(want);
  });

  it('refuses an option it does not know (ignored, `devices: 4` ran 2 replicas)', async () => {
    await expect(DataParallel.create(factory, { devices: 4 } as object)).rejects.toThrow(
      /DataParallel.create: unknown option "devices"/,
    );
  });

  it('a replica whose model differs, or that throws, raises DataParallelError naming the replica and the operation', async () => {
    await expect(DataParallel.create(factory, { replicas: 2, exportName: 'widerOnMain' })).rejects.toThrow(
      /replica 0: its model has \d+ parameters, the main one/,
    );
    dp = await DataParallel.create(factory, { replicas: 2, exportName: 'throwsInForward' });
    const x = tensor(batches[0].x, [BATCH, 6]);
    await expect(dp.forward(x)).rejects.toThrow(/DataParallel replica \d, forward: RangeError: bad input on purpose/);
    x.dispose();
    await expect(DataParallel.create(factory, { replicas: 0 })).rejects.toThrow(DataParallelError);
  });
});

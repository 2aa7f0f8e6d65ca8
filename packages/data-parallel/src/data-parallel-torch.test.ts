import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { autocast, manualSeed as autogradSeed, mse, noGrad, tensor } from '@ddp/autograd';
import { Generator, Linear, manualSeed } from '@ddp/nn';
import { afterEach, describe, expect, it } from 'vitest';
import { DataParallel, DataParallelError } from './index.js';
import { createModule } from './test/mlp.js';

const factory = new URL('./test/mlp.ts', import.meta.url);
const x = () => tensor(new Generator(5).normal(8 * 6), [8, 6]);
const close = (got: ArrayLike<number>, want: ArrayLike<number>, tol: number) =>
  Math.max(...Array.from(got, (v, i) => Math.abs(v - want[i]))) < tol;

let dp: DataParallel | null = null;
afterEach(async () => {
  await dp?.dispose();
  dp = null;
});

/** What torch's DataParallel carries onto its replicas, and what a replica failed to carry before. */
describe('DataParallel as torch.nn.DataParallel behaves', () => {
  it('autocast around the forward reaches every replica (was: the float32 output, and GradScaler missed overflows)', async () => {
    dp = await DataParallel.create(factory, { replicas: 2 });
    const single = createModule();
    const want = autocast({ dtype: 'bfloat16' }, () => single.forward(x())).dataSync();
    const got = (await autocast({ dtype: 'bfloat16' }, () => dp!.forward(x()))).dataSync();
    const plain = single.forward(x()).dataSync();
    expect(close(got, want, 1e-6)).toBe(true);
    expect(close(got, plain, 1e-4)).toBe(false); // bfloat16 is visible
  });

  it('a module before it gets its gradient through the input (was: zeros), as torch scatters back', async () => {
    dp = await DataParallel.create(factory, { replicas: 2 });
    const [pre, preRef] = [
      new Linear(6, 6, { generator: new Generator(1) }),
      new Linear(6, 6, { generator: new Generator(1) }),
    ];
    const y = tensor(new Generator(6).normal(8 * 3), [8, 3]);
    await mse(createModule().forward(preRef.forward(x())), y).backward();
    await mse(await dp.forward(pre.forward(x())), y).backward();
    expect(close(pre.weight.grad!.dataSync(), preRef.weight.grad!.dataSync(), 1e-6)).toBe(true);
  });

  it('a forward under noGrad works (was: TensorDisposedError on every call)', async () => {
    dp = await DataParallel.create(factory, { replicas: 2 });
    const got = await noGrad(() => dp!.forward(x()));
    expect(close(got.dataSync(), createModule().forward(x()).dataSync(), 1e-6)).toBe(true);
  });

  it('dropout: each replica its own mask, drawn from the seeded main stream (was: one mask, whatever the seed)', async () => {
    dp = await DataParallel.create(factory, { replicas: 2, exportName: 'withDropout' });
    const ones = tensor(new Float32Array(4 * 6).fill(1), [4, 6]);
    const masks = async (seed: number) => {
      manualSeed(seed);
      autogradSeed(seed);
      const out = Array.from((await dp!.forward(ones)).dataSync(), (v) => (v === 0 ? 0 : 1));
      return [out.slice(0, 8).join(''), out.slice(8).join('')]; // replica 0's rows, replica 1's
    };
    const [a, b, again] = [await masks(1), await masks(2), await masks(1)];
    expect(a[0]).not.toBe(a[1]);
    expect(a).not.toEqual(b);
    expect(again).toEqual(a);
  });

  it('one tensor in, one batched tensor out: anything else is a DataParallelError (were untyped errors)', async () => {
    dp = await DataParallel.create(factory, { replicas: 2 });
    const input = x();
    await expect(dp.forward([input, input] as never)).rejects.toThrow(/takes one tensor \[N, …\]/);
    await dp.dispose();
    dp = await DataParallel.create(factory, { replicas: 2, exportName: 'scalarOutput' });
    await expect(dp.forward(input)).rejects.toThrow(DataParallelError);
    await expect(dp.forward(input)).rejects.toThrow(/returned a scalar, which has no batch dimension/);
  });

  it('a script that ends without dispose() exits (was: the replica threads held it open)', async () => {
    const script = fileURLToPath(new URL('./test/no-dispose.child.ts', import.meta.url));
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--conditions=@ddp/source', '--import', 'tsx', script],
      { timeout: 60_000 },
    );
    expect(stdout).toContain('RESULT {"rows":4}');
  }, 70_000);
});

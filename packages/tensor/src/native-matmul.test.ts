import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import {
  getBackend,
  getNumThreads,
  nativeKernelsSummary,
  setBackend,
  setNumThreads,
  tf,
  useNativeKernels,
} from './index.js';
import { asWasmBackend } from './wasm-heap.js';

const initial = getBackend();
const native = useNativeKernels(true);
afterAll(async () => {
  useNativeKernels(true);
  await setBackend(initial as 'wasm');
});

const values = (shape: number[], seed: number) =>
  tf.tensor(
    Array.from({ length: tf.util.sizeFromShape(shape) }, (_, i) => Math.sin(seed + i * 0.37)),
    shape,
  );

type Case = [string, number[], number[], boolean, boolean];
/** Every transpose form, unbatched, batched, and with either side's batch broadcast (tfjs's rule). */
const cases: Case[] = [];
for (const [ta, tb] of [
  [false, false],
  [false, true],
  [true, false],
  [true, true],
] as const) {
  const a = (batch: number[]) => [...batch, ...(ta ? [5, 3] : [3, 5])];
  const b = (batch: number[]) => [...batch, ...(tb ? [4, 5] : [5, 4])];
  const form = `${ta ? 'Aᵀ' : 'A'}·${tb ? 'Bᵀ' : 'B'}`;
  cases.push([`${form}`, a([]), b([]), ta, tb]);
  cases.push([`${form} batched`, a([2, 3]), b([2, 3]), ta, tb]);
  cases.push([`${form}, A's batch broadcast`, a([1]), b([3]), ta, tb]);
  cases.push([`${form}, B's batch broadcast`, a([2, 3]), b([]), ta, tb]);
  cases.push([`${form}, B's batch [1, 1]`, a([2, 3]), b([1, 1]), ta, tb]);
}
cases.push(['Linear forward x·Wᵀ', [32, 64], [48, 64], false, true]);
cases.push(['Linear weight grad dyᵀ·x', [32, 48], [32, 64], true, false]);
cases.push(['row vector', [1, 64], [64, 40], false, false]);
cases.push(['empty inner dim', [3, 0], [0, 4], false, false]);

async function product(sa: number[], sb: number[], ta: boolean, tb: boolean) {
  const [a, b] = [values(sa, 1), values(sb, 2)];
  const before = tf.memory().numTensors;
  const c = tf.matMul(a, b, ta, tb);
  const temporaries = tf.memory().numTensors - before - 1;
  const out = { shape: c.shape, data: Array.from(await c.data()), temporaries };
  tf.dispose([a, b, c]);
  return out;
}

const worstRelative = (got: number[], want: number[]) =>
  got.reduce((worst, v, i) => Math.max(worst, Math.abs(v - want[i]) / (1 + Math.abs(want[i]))), 0);

describe.skipIf(!native)('native BatchMatMul', () => {
  it.each(cases)('%s: the same as wasm and cpu, no temporaries left', async (_name, sa, sb, ta, tb) => {
    await setBackend('cpu');
    const onCpu = await product(sa, sb, ta, tb);
    await setBackend('wasm');
    useNativeKernels(false);
    const onWasm = await product(sa, sb, ta, tb);
    useNativeKernels(true);
    const onNative = await product(sa, sb, ta, tb);
    expect(onNative.shape).toEqual(onCpu.shape);
    expect(onNative.temporaries).toBe(0);
    expect(worstRelative(onNative.data, onCpu.data)).toBeLessThan(1e-5);
    expect(worstRelative(onNative.data, onWasm.data)).toBeLessThan(1e-5);
  });

  // gemm.cc: oneDNN's sgemm from 2^16 multiply-adds on one thread; at 2 threads from 2^23 two halves of the
  // output (cut by columns, or by rows when those are more), each on one oneDNN thread; each transpose form
  // through every path, batched and as one taller product
  it.each([1, 2])(
    '%i thread(s): every transpose form on each side of the library switches, as tfjs-wasm',
    async (n) => {
      await setBackend('wasm');
      const threads = getNumThreads();
      setNumThreads(n);
      onTestFinished(() => setNumThreads(threads));
      for (const [m, k, cols] of [
        [160, 256, 256], // 10 485 760 multiply-adds, halves by columns at 2 threads
        [1040, 128, 72], // 9 584 640, halves by rows
        [48, 64, 40], // 122 880
        [16, 32, 16], // 8 192
      ]) {
        for (const [ta, tb] of [
          [false, false],
          [false, true],
          [true, false],
          [true, true],
        ] as const) {
          for (const batch of [[], [3]]) {
            const sa = [...batch, ...(ta ? [k, m] : [m, k])];
            const sb = tb ? [cols, k] : [k, cols];
            useNativeKernels(false);
            const onWasm = await product(sa, sb, ta, tb);
            useNativeKernels(true);
            const onNative = await product(sa, sb, ta, tb);
            expect(onNative.shape).toEqual(onWasm.shape);
            expect([sa, sb, ta, tb, worstRelative(onNative.data, onWasm.data) < 1e-5]).toEqual([sa, sb, ta, tb, true]);
          }
        }
      }
    },
  );

  it('writes into the new heap when allocating its output grows the wasm memory', async () => {
    await setBackend('wasm');
    const wasm = asWasmBackend(tf.backend())!;
    const a = tf.ones([4096, 1]);
    const b = tf.ones([1, 2048]);
    const heapBefore = wasm.wasm.HEAPU8.buffer;
    const c = tf.matMul(a, b); // 32 MiB output: more than the heap had free
    expect(wasm.wasm.HEAPU8.buffer).not.toBe(heapBefore);
    const sums = await tf.sum(c).data();
    expect(sums[0]).toBe(4096 * 2048);
    tf.dispose([a, b, c]);
  });

  it('falls back to tfjs for int32 and for batch shapes it cannot stride', async () => {
    await setBackend('wasm');
    const a = tf.tensor([[1, 2]], [1, 2], 'int32');
    expect(() => tf.matMul(a, a, false, true)).toThrow(/non-float32/); // tfjs-wasm's own message
    a.dispose();
  });

  // MultiheadAttention on a batch of 0: "BatchMatMul: negative size or stride" from the native path only
  it("an empty product (a batch of 0, or a zero inner size) is tfjs's: empty, or zeros", async () => {
    await setBackend('wasm');
    expect(tf.matMul(tf.zeros([0, 3, 4]), tf.zeros([0, 4, 5])).shape).toEqual([0, 3, 5]);
    expect(tf.matMul(tf.zeros([2, 0, 4]), tf.zeros([2, 4, 5])).shape).toEqual([2, 0, 5]);
    const inner = tf.matMul(tf.ones([2, 3, 0]), tf.ones([2, 0, 5]));
    expect([...inner.dataSync()]).toEqual(new Array(30).fill(0));
  });

  it('switches off and on, restoring the kernels it replaced', async () => {
    await setBackend('wasm');
    const withNative = tf.getKernel('BatchMatMul', 'wasm').kernelFunc;
    expect(useNativeKernels(false)).toBe(false);
    const without = tf.getKernel('BatchMatMul', 'wasm').kernelFunc;
    expect(without).not.toBe(withNative);
    expect(nativeKernelsSummary()).toBe('ddp: native kernels off (DDP_NATIVE=0)');
    expect(useNativeKernels(false)).toBe(false);
    expect(tf.getKernel('BatchMatMul', 'wasm').kernelFunc).toBe(without);
    expect(useNativeKernels(true)).toBe(true);
    expect(nativeKernelsSummary()).toMatch(/^ddp: native kernels on \(OpenBLAS .*\): BatchMatMul, Conv2D, /);
  });
});

// probe Y: tfjs pairs flattened batches, so batch dims that broadcast both ways gave other products than torch's
describe('raw tf.matMul broadcasts batch dims as torch', () => {
  /** torch.matmul's result: each output batch from the a and b batches broadcasting pairs. */
  function reference(sa: number[], sb: number[]): number[] {
    const [a, b] = [values(sa, 1), values(sb, 2)];
    const out = tf.tidy(() => {
      const rank = Math.max(sa.length, sb.length);
      const outer = tf.backend_util.assertAndGetBroadcastShape(sa.slice(0, -2), sb.slice(0, -2));
      const full = (t: tf.Tensor, s: number[]) =>
        tf.broadcastTo(tf.reshape(t, [...Array(rank - s.length).fill(1), ...s]), [...outer, ...s.slice(-2)]);
      const [fa, fb] = [full(a, sa), full(b, sb)];
      const flat = (t: tf.Tensor) => tf.unstack(tf.reshape(t, [-1, ...t.shape.slice(-2)]));
      const [as, bs] = [flat(fa), flat(fb)];
      return tf.stack(as.map((x, i) => tf.matMul(x as tf.Tensor2D, bs[i] as tf.Tensor2D)));
    });
    const data = Array.from(out.dataSync());
    tf.dispose([a, b, out]);
    return data;
  }

  it.each([
    [
      [2, 1, 2, 3],
      [1, 3, 3, 2],
    ],
    [
      [2, 1, 2, 3],
      [2, 3, 2],
    ],
    [
      [1, 2, 2, 3],
      [2, 1, 3, 2],
    ],
    [
      [3, 2, 3],
      [1, 3, 3, 2],
    ],
  ])('%j · %j: torch’s pairs on native, wasm and cpu, no temporaries left', async (sa, sb) => {
    for (const [backend, nativeOn] of [
      ['cpu', false],
      ['wasm', false],
      ['wasm', true],
    ] as const) {
      await setBackend(backend);
      useNativeKernels(nativeOn);
      const want = reference(sa, sb);
      const got = await product(sa, sb, false, false);
      expect([backend, nativeOn, got.temporaries]).toEqual([backend, nativeOn, 0]);
      expect(worstRelative(got.data, want)).toBeLessThan(1e-5);
    }
    useNativeKernels(true);
  });
});

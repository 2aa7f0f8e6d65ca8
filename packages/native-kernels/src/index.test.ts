import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GOMP_SPINCOUNT, limitOpenMPSpin, loadNativeKernels } from './index.js';
import { chooseOpenBLASCore, openblasCoreFor } from './openblas-core.js';

const { kernels, reason } = loadNativeKernels();

/** A heap with float32 arrays laid out at known byte offsets, as the wasm heap holds tensors. */
function heapWith(...arrays: number[][]) {
  const offsets: number[] = [];
  let bytes = 16;
  for (const a of arrays) {
    offsets.push(bytes);
    bytes += a.length * 4 + 16;
  }
  const heap = new Uint8Array(bytes + 4096);
  for (const [i, a] of arrays.entries()) new Float32Array(heap.buffer, offsets[i], a.length).set(a);
  return { heap, offsets, read: (offset: number, n: number) => Array.from(new Float32Array(heap.buffer, offset, n)) };
}

describe.skipIf(!kernels)('native kernels addon', () => {
  it('multiplies in every transpose form, batched and with a repeated B', () => {
    // A [2, 2, 3] = two 2×3 matrices, B [3, 2]
    const a = [1, 2, 3, 4, 5, 6, 0, 1, 0, 1, 0, 1];
    const b = [1, 0, 0, 1, 1, 1];
    const { heap, offsets, read } = heapWith(a, b, Array(8).fill(9));
    kernels!.BatchMatMul(heap, offsets[0], offsets[1], offsets[2], 2, 2, 2, 3, false, false, 6, 0);
    expect(read(offsets[2], 8)).toEqual([4, 5, 10, 11, 0, 1, 2, 1]);
    // Aᵀ·Bᵀ, the same 6 values stored as A [3, 2] and as B [2, 3]
    kernels!.BatchMatMul(heap, offsets[0], offsets[0], offsets[2], 1, 2, 2, 3, true, true, 0, 0);
    const A = [
      [1, 2],
      [3, 4],
      [5, 6],
    ];
    const B = [
      [1, 2, 3],
      [4, 5, 6],
    ];
    const want = [0, 1].flatMap((i) => [0, 1].map((j) => [0, 1, 2].reduce((s, p) => s + A[p][i] * B[j][p], 0)));
    expect(read(offsets[2], 4)).toEqual(want);
  });

  it('gives the same products at 2 threads (two halves of the output) as at 1, cut by columns or by rows', () => {
    // 8.7 M multiply-adds (past 2^23, where 2 threads split a product), sides no multiple of the
    // 16-column cut, so each half's offsets into A, B and C are exercised in every transpose form
    const random = (n: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 12.9898) * 2);
    for (const [m, n, k] of [
      [40, 3400, 64],
      [3400, 40, 64],
    ] as const) {
      for (const [transA, transB] of [
        [false, false],
        [false, true],
        [true, false],
        [true, true],
      ] as const) {
        const a = random(m * k);
        const b = random(k * n).map((v) => v * 0.5);
        const want = Array.from({ length: m * n }, (_, ij) => {
          const [i, j] = [Math.floor(ij / n), ij % n];
          let sum = 0;
          for (let p = 0; p < k; p++) sum += a[transA ? p * m + i : i * k + p] * b[transB ? j * k + p : p * n + j];
          return sum;
        });
        const { heap, offsets, read } = heapWith(a, b, Array(m * n).fill(Number.NaN));
        const [x, w, y] = offsets as [number, number, number];
        const results = [1, 2].map((threads) => {
          kernels!.setThreads(threads);
          kernels!.BatchMatMul(heap, x, w, y, 1, m, n, k, transA, transB, 0, 0);
          return read(y, m * n);
        });
        kernels!.setThreads(1);
        for (const got of results) {
          const worst = got.reduce((w, v, i) => Math.max(w, Math.abs(v - want[i])), 0);
          expect(worst, `${m}×${n}×${k} transA ${transA} transB ${transB}`).toBeLessThan(1e-3);
        }
      }
    }
  });

  it('convolves (im2col + sgemm) like the definition', () => {
    // x [1, 3, 3, 1] = 1..9, 2×2 filter of ones, stride 1, no padding → y [1, 2, 2, 1]
    const { heap, offsets, read } = heapWith([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 1, 1, 1], [0, 0, 0, 0]);
    kernels!.Conv2D(heap, offsets[0], offsets[1], offsets[2], 1, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 0, 0, 2, 2, false);
    expect(read(offsets[2], 4)).toEqual([12, 16, 24, 28]);
  });

  it('convolves on OIHW weights with the bias inside, and takes both gradients and the bias one in one call', () => {
    // x [1, 1, 3, 3] = 1..9 (NCHW), 2×2 weight of ones, bias 10, stride 1 → y [1, 1, 2, 2]; dy of ones
    const arrays = [[1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 1, 1, 1], [10], [0, 0, 0, 0], [1, 1, 1, 1], Array(9).fill(0)];
    const { heap, offsets, read } = heapWith(...arrays, [0, 0, 0, 0], [0]);
    const [x, w, b, y, dy, dx, dw, db] = offsets as [number, number, number, number, number, number, number, number];
    const geometry = [1, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 0, 0, 2, 2, true] as const;
    kernels!.ConvForward(heap, x, w, b, y, -1, ...geometry);
    expect(read(y, 4)).toEqual([22, 26, 34, 38]);
    kernels!.ConvForward(heap, x, w, -1, y, -1, ...geometry);
    expect(read(y, 4)).toEqual([12, 16, 24, 28]);
    kernels!.ConvBackward(heap, x, w, dy, dx, dw, db, -1, ...geometry);
    expect([read(dx, 9), read(dw, 4), read(db, 1)]).toEqual([[1, 2, 1, 2, 4, 2, 1, 2, 1], [12, 16, 24, 28], [4]]);
    kernels!.ConvBackward(heap, x, w, dy, -1, dw, -1, -1, ...geometry); // neither dx nor the bias's
    expect(read(dw, 4)).toEqual([12, 16, 24, 28]);
    expect(() => kernels!.ConvForward(heap, x, w, heap.length - 2, y, -1, ...geometry)).toThrow(RangeError);
    expect(() => kernels!.ConvBackward(heap, x, w, dy, dx, dw, heap.length, -1, ...geometry)).toThrow(RangeError);
    expect(() => kernels!.ConvBackward(heap, x, w, dy, dx, -1, db, -1, ...geometry)).toThrow(RangeError);
  });

  it('refuses offsets outside the heap, misaligned ones and a heap that is not a Uint8Array', () => {
    const { heap, offsets } = heapWith([1, 2, 3, 4], [1, 2, 3, 4], [0, 0, 0, 0]);
    const [a, b, c] = offsets as [number, number, number];
    expect(() => kernels!.BatchMatMul(heap, a, b, heap.length - 8, 1, 2, 2, 2, false, false, 0, 0)).toThrow(RangeError);
    expect(() => kernels!.BatchMatMul(heap, a + 2, b, c, 1, 2, 2, 2, false, false, 0, 0)).toThrow(/byte offset/);
    expect(() => kernels!.BatchMatMul(heap, a, b, c, 3, 2, 2, 2, false, false, 1e9, 0)).toThrow(/inside the/);
    expect(() =>
      kernels!.BatchMatMul(new Float32Array(heap.buffer) as never, a, b, c, 1, 2, 2, 2, false, false, 0, 0),
    ).toThrow(/Uint8Array/);
    expect(() => kernels!.Conv2D(heap, a, b, c, 1, 1e6, 1e6, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1e6, 1e6, false)).toThrow(
      RangeError,
    );
    expect(() => kernels!.Conv2D(heap, a, b, c, 1, 2, 2, 1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 2, 2, false)).toThrow(/strides/);
  });

  it("checks the fused kernels' sizes against the heap too", () => {
    const { heap, offsets } = heapWith([1, 2, 3, 4], [1, 1], [0, 0], [0, 0, 0, 0], [0, 0], [0, 0]);
    const [x, g, b, y, m, r] = offsets as [number, number, number, number, number, number];
    kernels!.LayerNorm(heap, x, g, b, y, m, r, 2, 2, 1e-5);
    expect(() => kernels!.LayerNorm(heap, x, g, b, y, m, heap.length - 4, 2, 2, 1e-5)).toThrow(/inside the/);
    expect(() => kernels!.LayerNorm(heap, x, g, b, y, m, r, 2, 0, 1e-5)).toThrow(/bad size/);
    expect(() => kernels!.LayerNormGrad(heap, x, x, m, r, g, y, g, b, 2, 2)).not.toThrow();
    expect(() => kernels!.LayerNormGrad(heap, x, x, m, r, g, y, g, heap.length, 2, 2)).toThrow(RangeError);
    expect(() => kernels!.Gelu(heap, x, heap.length - 8, 4)).toThrow(RangeError);
    expect(() => kernels!.GeluGrad(heap, x, x, y, -1)).toThrow(/negative/);
    expect(() => kernels!.Softmax(heap, x, y, 1e6, 4)).toThrow(RangeError);
    expect(() => kernels!.SoftmaxGrad(heap, x, x, y + 2, 2, 2)).toThrow(/byte offset/);
    expect(() => kernels!.ReluGrad(heap, x, x, heap.length - 8, 4)).toThrow(RangeError);
    expect(() => kernels!.BiasAdd(heap, x, g, heap.length - 8, 1, 2, 2)).toThrow(RangeError);
    expect(() => kernels!.BiasAdd(heap, x, g, y, 1, 0, 2)).toThrow(/bad size/);
    expect(() => kernels!.ChannelSum(heap, x, m, 1e6, 2, 2)).toThrow(RangeError);
    expect(() => kernels!.ChannelSum(heap, x, m, -1, 2, 2)).toThrow(/bad size/);
  });

  it('rounds to bfloat16 and float16 in place or into another array, across the OpenMP shares, sizes checked', () => {
    // 2^16 + 3 values (past the threshold where calls are shared among threads): 1 + 2^-8 ties to even in
    // bfloat16, 1 + 2^-11 in float16, 70 000 overflows float16
    const values = Array.from({ length: (1 << 16) + 3 }, (_, i) => [1 + 2 ** -8, 1 + 2 ** -11, 70000][i % 3]);
    const { heap, offsets, read } = heapWith(values, Array(values.length).fill(0));
    const [x, y] = offsets as [number, number];
    kernels!.RoundToHalf(heap, x, y, values.length, true);
    expect(new Set(read(y, values.length))).toEqual(new Set([1 + 2 ** -8, 1, Number.POSITIVE_INFINITY]));
    kernels!.RoundToHalf(heap, x, x, values.length, false);
    expect(new Set(read(x, values.length))).toEqual(new Set([1, 70144]));
    expect(() => kernels!.RoundToHalf(heap, x, heap.length - 8, 4, false)).toThrow(RangeError);
    expect(() => kernels!.RoundToHalf(heap, x, y, -1, true)).toThrow(/negative/);
  });

  it('adds a bias along the channel axis and sums over all but it', () => {
    const { heap, offsets, read } = heapWith([1, 2, 3, 4, 5, 6, 7, 8], [10, 20], [0, 0, 0, 0, 0, 0, 0, 0], [0, 0]);
    const [x, bias, y, sums] = offsets as [number, number, number, number];
    kernels!.BiasAdd(heap, x, bias, y, 2, 2, 2); // NCHW-like [2, 2, 2]
    expect(read(y, 8)).toEqual([11, 12, 23, 24, 15, 16, 27, 28]);
    kernels!.ChannelSum(heap, x, sums, 2, 2, 2);
    expect(read(sums, 2)).toEqual([1 + 2 + 5 + 6, 3 + 4 + 7 + 8]);
    kernels!.BiasAdd(heap, x, bias, y, 4, 2, 1); // NHWC-like [4, 2]
    expect(read(y, 8)).toEqual([11, 22, 13, 24, 15, 26, 17, 28]);
    kernels!.ChannelSum(heap, x, sums, 4, 2, 1);
    expect(read(sums, 2)).toEqual([16, 20]);
  });

  it('sets its thread count and names its library', () => {
    expect(kernels!.setThreads(1)).toBe(1);
    expect(() => kernels!.setThreads(0)).toThrow(RangeError);
    expect(kernels!.library()).toMatch(/^OpenBLAS \d/);
  });
});

describe('OpenMP wait policy', () => {
  it("limits libgomp's spinning before the addon loads it, unless the user chose a policy", () => {
    expect(process.env.GOMP_SPINCOUNT ?? process.env.OMP_WAIT_POLICY).toBeDefined();
    const env: NodeJS.ProcessEnv = {};
    limitOpenMPSpin(env);
    expect(env.GOMP_SPINCOUNT).toBe(GOMP_SPINCOUNT);
    for (const chosen of [{ GOMP_SPINCOUNT: 'infinite' }, { OMP_WAIT_POLICY: 'active' }]) {
      const env: NodeJS.ProcessEnv = { ...chosen };
      limitOpenMPSpin(env);
      expect(env).toEqual(chosen);
    }
  });
});

describe('OpenBLAS kernel set', () => {
  const flags = (...f: string[]) => `processor\t: 0\nflags\t\t: fpu sse2 ${f.join(' ')}\nbugs\t\t: spectre\n`;
  const avx512 = ['avx2', 'fma', 'avx512f', 'avx512cd', 'avx512bw', 'avx512dq', 'avx512vl'];

  it("takes the widest set the CPU has, none below AVX2, and leaves a user's choice alone", () => {
    expect(openblasCoreFor(flags(...avx512, 'avx512_fp16'))).toBe('SkylakeX');
    // AVX-512 foundation alone (Knights Landing)
    expect(openblasCoreFor(flags('avx2', 'fma', 'avx512f'))).toBe('Haswell');
    expect(openblasCoreFor(flags('avx', 'sse4_2'))).toBeNull();
    expect(openblasCoreFor('')).toBeNull();
    const env: NodeJS.ProcessEnv = {};
    chooseOpenBLASCore(env, flags(...avx512));
    expect(env.OPENBLAS_CORETYPE).toBe('SkylakeX');
    const chosen: NodeJS.ProcessEnv = { OPENBLAS_CORETYPE: 'Zen' };
    chooseOpenBLASCore(chosen, flags(...avx512));
    expect(chosen.OPENBLAS_CORETYPE).toBe('Zen');
  });

  it.skipIf(!kernels)(
    'runs the set the CPU supports, not a fallback (Prescott on a model OpenBLAS does not know)',
    () => {
      const want = process.env.OPENBLAS_CORETYPE ?? openblasCoreFor(readFileSync('/proc/cpuinfo', 'utf8'));
      if (want) expect(kernels!.blasCore().toLowerCase()).toBe(want.toLowerCase());
    },
  );
});

describe.skipIf(kernels)('without the addon', () => {
  it('says why', () => {
    expect(reason).toMatch(/^addon (not built|failed to load)/);
  });
});

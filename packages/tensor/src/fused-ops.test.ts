import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { FusedOpError } from './errors.js';
import {
  biasAdd,
  channelSum,
  gelu,
  geluGrad,
  getBackend,
  getNumThreads,
  layerNorm,
  layerNormGrad,
  reluGrad,
  roundToPrecision,
  setBackend,
  setNumThreads,
  softmax,
  softmaxGrad,
  tf,
  useNativeKernels,
} from './index.js';

interface Stored {
  shape: number[];
  data: number[];
}
interface Case {
  name: string;
  eps?: number;
  /** torch's float32 result's largest error against the float64 outputs */
  float32Error?: Record<string, number>;
  inputs: Record<string, Stored>;
  outputs: Record<string, Stored>;
}
/** PyTorch 1.13's values (src/fixtures/make_fused_fixtures.py). */
const fixtures = JSON.parse(readFileSync(new URL('./fixtures/fused_ops.json', import.meta.url), 'utf8')) as Record<
  'layerNorm' | 'gelu' | 'softmax',
  Case[]
>;

const initial = getBackend();
const initialThreads = getNumThreads();
const native = useNativeKernels(true);
afterAll(async () => {
  useNativeKernels(true);
  setNumThreads(initialThreads);
  await setBackend(initial as 'wasm');
});

const onWasm = async (nativeOn: boolean) => {
  await setBackend('wasm');
  useNativeKernels(nativeOn);
};
/** The paths every fused op takes: tfjs ops on cpu and on wasm, and the native kernels where the addon is built. */
const paths: [string, () => Promise<void>][] = [
  ['cpu', async () => setBackend('cpu')],
  ['wasm (tfjs ops)', async () => onWasm(false)],
  ...(native ? [['wasm (native)', async () => onWasm(true)] as [string, () => Promise<void>]] : []),
];

const load = (s: Stored) => tf.tensor(s.data, s.shape, 'float32');

/** Runs `op` on the case's inputs; returns its outputs' values and how many tensors it left behind. */
function run(c: Case, op: (inputs: Record<string, tf.Tensor>) => Record<string, tf.Tensor>) {
  const inputs = Object.fromEntries(Object.entries(c.inputs).map(([k, v]) => [k, load(v)]));
  const before = tf.memory().numTensors;
  const outs = op(inputs);
  const left = tf.memory().numTensors - before - Object.keys(outs).length;
  const values = Object.fromEntries(
    Object.entries(outs).map(([k, t]) => [k, { shape: t.shape, data: Array.from(t.dataSync()) }]),
  );
  tf.dispose([...Object.values(inputs), ...Object.values(outs)]);
  return { values, left };
}

/**
 * Within float32 rounding of PyTorch's float64 values: |got − want| ≤ 2e-5 + 2e-5·|want|, or no further off
 * than torch's own float32 result where that is more (rows far from zero).
 */
function expectClose(
  got: Record<string, Stored>,
  want: Record<string, Stored>,
  float32Error: Record<string, number> = {},
) {
  for (const [name, w] of Object.entries(want)) {
    const g = got[name];
    expect(g.shape, name).toEqual(w.shape);
    const bound = float32Error[name] ?? 0;
    const worst = Math.max(0, ...g.data.map((v, i) => Math.abs(v - w.data[i]) - 2e-5 * Math.abs(w.data[i])));
    if (bound > 2e-5)
      expect(Math.max(...g.data.map((v, i) => Math.abs(v - w.data[i]))), name).toBeLessThanOrEqual(bound);
    else expect(worst, `${name}: largest error beyond the relative part`).toBeLessThanOrEqual(2e-5);
  }
}

describe.each(paths)('fused ops on %s', (_path, select) => {
  it.each(fixtures.layerNorm.map((c) => [c.name, c] as const))(
    'layerNorm and layerNormGrad, %s: PyTorch values',
    async (_n, c) => {
      await select();
      const forward = run(c, ({ x, gamma, beta }) => ({ ...layerNorm(x, gamma, beta, c.eps!) }));
      expectClose(forward.values, { y: c.outputs.y, mean: c.outputs.mean, rstd: c.outputs.rstd }, c.float32Error);
      const { mean, rstd } = c.outputs;
      const backward = run(
        { ...c, inputs: { ...c.inputs, mean: mean, rstd: rstd } },
        ({ dy, x, mean, rstd, gamma }) => ({
          ...layerNormGrad(dy, x, mean, rstd, gamma),
        }),
      );
      expectClose(
        backward.values,
        { dx: c.outputs.dx, dgamma: c.outputs.dgamma, dbeta: c.outputs.dbeta },
        c.float32Error,
      );
      expect([forward.left, backward.left]).toEqual([0, 0]);
    },
  );

  it('layerNorm of rows far from zero: the mean to one float32 ulp (torch 1.13 is 3 ulps off), y as that ulp moves it', async () => {
    await select();
    const c = fixtures.layerNorm.find((f) => f.name.includes('far from zero'))!;
    const { values } = run(c, ({ x, gamma, beta }) => ({ ...layerNorm(x, gamma, beta, c.eps!) }));
    const largest = (a: number[]) => Math.max(...a.map(Math.abs));
    const worst = (name: string) => largest(values[name].data.map((v, i) => v - c.outputs[name].data[i]));
    const ulp = 2 ** (Math.floor(Math.log2(largest(c.outputs.mean.data))) - 23);
    // was 1.1e-3 and 3.2e-3 on wasm's tfjs ops: a float32 mean of the rows, 2 ulps off
    expect(worst('mean')).toBeLessThanOrEqual(ulp);
    const moved = ulp * largest(c.outputs.rstd.data) * largest(c.inputs.gamma.data);
    expect(worst('y')).toBeLessThanOrEqual(moved + 2e-5);
  });

  // the exact values, in double; torch 1.13 gives NaN (its float32 variance overflows too)
  it('layerNorm of a row spread beyond 1.8e19: the normalised row (was 0 on the wasm path, silently; probe AW)', async () => {
    await select();
    const x = tf.tensor2d([
      [1e20, 1e20, -1e20, 1e20],
      [1, 2, 3, 4],
    ]);
    const [gamma, beta] = [tf.ones([4]), tf.zeros([4])];
    const { y, mean, rstd } = layerNorm(x, gamma, beta, 1e-5);
    const rows = y.arraySync() as number[][];
    const want = [1, 1, -3, 1].map((v) => v / Math.sqrt(3));
    for (const [i, v] of rows[0].entries()) expect(v).toBeCloseTo(want[i], 5);
    for (const [i, v] of rows[1].entries()) expect(v).toBeCloseTo((i - 1.5) / Math.sqrt(1.25 + 1e-5), 5);
    tf.dispose([x, gamma, beta, y, mean, rstd]);
  });

  it.each(fixtures.gelu.map((c) => [c.name, c] as const))('gelu and geluGrad, %s: PyTorch values', async (_n, c) => {
    await select();
    const r = run(c, ({ x, dy }) => ({ y: gelu(x), dx: geluGrad(dy, x) }));
    expectClose(r.values, c.outputs);
    expect(r.left).toBe(0);
  });

  it.each(fixtures.softmax.map((c) => [c.name, c] as const))(
    'softmax and softmaxGrad, %s: PyTorch values',
    async (_n, c) => {
      await select();
      const r = run(c, ({ x, dy }) => {
        const y = softmax(x);
        return { y, dx: softmaxGrad(dy, y) };
      });
      expectClose(r.values, c.outputs);
      expect(r.left).toBe(0);
    },
  );

  it("reluGrad as torch 1.13's relu backward: 0 where x <= 0 whatever dy, dy elsewhere (a NaN x passes dy)", async () => {
    // before: dy·step(x), tfjs's: NaN where x was NaN, and ±∞ or NaN gradients at dead units became NaN
    await select();
    const x = tf.tensor([-2, -0, 0, 1e-30, 3, NaN, NaN, -1, 2, -1, 5]);
    const dy = tf.tensor([5, 6, 7, 8, -9, 1, 0, NaN, NaN, Infinity, -Infinity]);
    const before = tf.memory().numTensors;
    const dx = reluGrad(dy, x);
    expect(tf.memory().numTensors).toBe(before + 1);
    expect(Array.from(dx.dataSync()).map((v) => (v === 0 ? 0 : v))).toEqual([
      0,
      0,
      0,
      8,
      -9,
      1,
      0,
      0,
      NaN,
      0,
      -Infinity,
    ]);
    tf.dispose([x, dy, dx]);
  });

  it("gelu, geluGrad and reluGrad of a 0-d tensor: torch's values (was RangeError on the native kernels)", async () => {
    await select();
    const before = tf.memory().numTensors;
    const got = tf.tidy(() => {
      const [x, dy] = [tf.scalar(2), tf.scalar(-3)];
      const scalar = (t: tf.Tensor) => [t.shape, t.dataSync()[0]];
      return [gelu(x), geluGrad(dy, x), reluGrad(dy, x), reluGrad(dy, tf.scalar(-0.5))].map(scalar);
    });
    // torch: y = F.gelu(x); y.backward(dy) with x = tensor(2.), dy = tensor(-3.); torch.relu likewise
    const want = [1.9544997215270996, -3.255695343017578, -3, 0];
    expect(got.map(([shape]) => shape)).toEqual([[], [], [], []]);
    got.forEach(([, v], i) => {
      expect(v).toBeCloseTo(want[i], 5);
    });
    expect(tf.memory().numTensors).toBe(before);
  });

  it('biasAdd and channelSum over NCHW and NHWC: the sums written out', async () => {
    await select();
    const x = tf.tensor(
      Array.from({ length: 24 }, (_, i) => i),
      [2, 3, 2, 2],
    );
    const b = tf.tensor([100, 200, 300]);
    const before = tf.memory().numTensors;
    const [nchw, nhwc, sumC, sumW] = [
      biasAdd(x, b, 1),
      biasAdd(tf.reshape(x, [4, 2, 3]), b, 2),
      channelSum(x, 1),
      channelSum(x, 3),
    ];
    expect(Array.from(nchw.dataSync()).slice(0, 12)).toEqual([
      100, 101, 102, 103, 204, 205, 206, 207, 308, 309, 310, 311,
    ]);
    expect(Array.from(nhwc.dataSync()).slice(0, 6)).toEqual([100, 201, 302, 103, 204, 305]);
    // channel c of NCHW: 4c..4c+3 and 12+4c..12+4c+3 → 32c + 60; last axis of 2: evens and odds
    expect(Array.from(sumC.dataSync())).toEqual([60, 92, 124]);
    expect(Array.from(sumW.dataSync())).toEqual([132, 144]);
    expect(tf.memory().numTensors).toBe(before + 5); // the four results and biasAdd's reshaped input
    tf.dispose([x, b, nchw, nhwc, sumC, sumW]);
  });

  it('rejects tensors of the wrong shape with FusedOpError, leaving nothing behind', async () => {
    await select();
    const x = tf.ones([2, 3]);
    const wrong = tf.ones([2]);
    const stats = tf.ones([2, 1]);
    const gamma = tf.ones([3]);
    const scalar = tf.scalar(1);
    const before = tf.memory().numTensors;
    expect(() => layerNorm(x, wrong, wrong, 1e-5)).toThrow(FusedOpError);
    expect(() => layerNorm(x, gamma, wrong, 1e-5)).toThrow(/beta has shape \[2\], expected \[3\]/);
    expect(() => layerNormGrad(x, x, wrong, stats, gamma)).toThrow(/mean has shape \[2\], expected \[2, 1\]/);
    expect(() => geluGrad(wrong, x)).toThrow(FusedOpError);
    expect(() => reluGrad(wrong, x)).toThrow(FusedOpError);
    expect(() => softmaxGrad(wrong, x)).toThrow(FusedOpError);
    expect(() => softmax(scalar)).toThrow(/at least one axis/);
    expect(() => biasAdd(x, gamma, 0)).toThrow(/bias has shape \[3\], expected \[2\]/);
    expect(() => channelSum(x, 2)).toThrow(/channel axis 2 is not an axis of a rank-2 tensor/);
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([x, wrong, stats, gamma, scalar]);
  });
});

/** Every fused op on random inputs of `shape` (x scaled by `scale`), as name → values. */
function allOps(shape: number[], scale: number): Record<string, Float32Array> {
  return tf.tidy(() => {
    const c = shape[shape.length - 1];
    const x = tf.mul(tf.randomNormal(shape, 0, 1, 'float32', 1), scale);
    const dy = tf.randomNormal(shape, 0, 1, 'float32', 2);
    const gamma = tf.randomNormal([c], 1, 0.5, 'float32', 3);
    const beta = tf.randomNormal([c], 0, 0.5, 'float32', 4);
    const ln = layerNorm(x, gamma, beta, 1e-5);
    const lnGrad = layerNormGrad(dy, x, ln.mean, ln.rstd, gamma);
    const y = softmax(x);
    const channels = tf.randomNormal([shape[1]], 0, 1, 'float32', 5);
    const last = x.rank - 1;
    // sums of up to 10 000 values: tfjs's float32 running sum drifts ~1e-6 per unit of input, so small inputs
    const small = tf.mul(dy, 0.01);
    const channelOps = {
      biasAdd1: biasAdd(x, channels, 1),
      biasAddLast: biasAdd(x, beta, last),
      channelSum1: channelSum(small, 1),
      channelSumLast: channelSum(small, last),
      channelSum0: channelSum(small, 0),
    };
    const outs = {
      ...channelOps,
      ...ln,
      ...lnGrad,
      gelu: gelu(x),
      geluGrad: geluGrad(dy, x),
      reluGrad: reluGrad(dy, x),
      softmax: y,
      softmaxGrad: softmaxGrad(dy, y),
    };
    return Object.fromEntries(Object.entries(outs).map(([k, t]) => [k, t.dataSync() as Float32Array]));
  });
}

describe.skipIf(!native)('native fused kernels', () => {
  it('run natively when on (the profile shows the kernels), tfjs ops when off', async () => {
    await onWasm(true);
    const names = async () => (await tf.profile(() => allOps([3, 8], 1))).kernelNames;
    const on = await names();
    for (const k of [
      'DdpLayerNorm',
      'DdpLayerNormGrad',
      'DdpGelu',
      'DdpGeluGrad',
      'DdpReluGrad',
      'DdpSoftmax',
      'DdpSoftmaxGrad',
      'DdpBiasAdd',
      'DdpChannelSum',
    ])
      expect(on).toContain(k);
    useNativeKernels(false);
    expect((await names()).filter((k) => k.startsWith('Ddp'))).toEqual([]);
  });

  // above the size at which the kernels share rows among threads, and below it; 1 and 2 threads
  it.each([
    ['[300, 130], threads share the rows', [300, 130], 1],
    ['[4, 4, 50, 50], attention-like', [4, 4, 50, 50], 3],
    ['[5, 7], one thread whatever the setting', [5, 7], 1],
  ] as const)('%s: native equals tfjs ops on wasm at 1 and 2 threads', async (_n, shape, scale) => {
    await onWasm(false);
    const want = allOps([...shape], scale);
    await onWasm(true);
    for (const threads of [1, 2]) {
      setNumThreads(threads);
      const before = tf.memory().numTensors;
      const got = allOps([...shape], scale);
      expect(tf.memory().numTensors).toBe(before);
      for (const [k, w] of Object.entries(want)) {
        const worst = Math.max(...got[k].map((v, i) => Math.abs(v - w[i]) / (1 + Math.abs(w[i]))));
        expect(worst, `${k} at ${threads} thread(s)`).toBeLessThan(3e-5);
      }
    }
  });

  // probe Y: each thread's share ended in a scalar remainder, whose erff differs from the vector one in the last bit
  it('element-wise kernels give the same bits at 1 and 2 threads (gelu, geluGrad, exp)', async () => {
    await onWasm(true);
    const n = 90_000; // shares of 45 000 = 2812.5 vectors of 16
    // the tail of 1 + erf(x/√2), where the two erff differ most
    const x = tf.tensor(Array.from({ length: n }, (_, i) => -4.5 + (i % 97) * 0.01));
    const bits = () =>
      [gelu(x), geluGrad(x, x), tf.exp(x)].map((t) => {
        const out = Array.from(new Uint32Array((t.dataSync() as Float32Array).slice().buffer));
        t.dispose();
        return out;
      });
    setNumThreads(1);
    const one = bits();
    setNumThreads(2);
    const two = bits();
    for (const [k, values] of one.entries())
      expect(
        values.findIndex((v, i) => v !== two[k][i]),
        `output ${k}: first differing element`,
      ).toBe(-1);
    x.dispose();
  });

  it('softmax: rows with −∞, a leading NaN and ±1000 (a row of 37: vector remainder) as tfjs ops give them', async () => {
    const rows = [
      [-Infinity, 0, 1],
      [Number.NaN, 1, 2],
      [1000, 0, -1000],
      [-Infinity, -Infinity, -Infinity],
    ];
    const x = rows.flatMap((r) => Array.from({ length: 37 }, (_, j) => r[j % 3] + (j % 5) * 0.25));
    const values = () => tf.tidy(() => Array.from(softmax(tf.tensor2d(x, [rows.length, 37])).dataSync()));
    await onWasm(false);
    const want = values();
    await onWasm(true);
    const got = values();
    expect(got.map((v) => Number.isNaN(v))).toEqual(want.map((v) => Number.isNaN(v)));
    expect(Math.max(...got.map((v, i) => (Number.isNaN(v) ? 0 : Math.abs(v - want[i]))))).toBeLessThan(1e-6);
  });

  it('takes a 0-d tensor as one row of one element: softmax 1, rounding as torch (was RangeError)', async () => {
    await onWasm(true);
    const got = tf.tidy(() =>
      [
        tf.engine().runKernel('DdpSoftmax', { x: tf.scalar(0.5) }) as tf.Tensor,
        roundToPrecision(tf.scalar(1.1), 'bfloat16'),
        roundToPrecision(tf.scalar(1.1), 'float16'),
      ].map((t) => [t.shape, t.dataSync()[0]]),
    );
    // torch.softmax(tensor(0.5), 0); tensor(1.1).to(torch.bfloat16).float(), .to(torch.float16).float()
    expect(got).toEqual([
      [[], 1],
      [[], 1.1015625],
      [[], 1.099609375],
    ]);
  });

  it('leaves empty tensors to tfjs ops', async () => {
    await onWasm(true);
    const x = tf.zeros([0, 4]);
    const gamma = tf.ones([4]);
    const ln = layerNorm(x, gamma, gamma, 1e-5);
    expect([ln.y.shape, ln.mean.shape, ln.rstd.shape]).toEqual([
      [0, 4],
      [0, 1],
      [0, 1],
    ]);
    const y = gelu(x);
    expect(y.shape).toEqual([0, 4]);
    tf.dispose([x, gamma, y, ...Object.values(ln)]);
  });
});

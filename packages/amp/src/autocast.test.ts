import { readFileSync } from 'node:fs';
import {
  type AutocastDtype,
  autocast,
  autocastDtype,
  conv2d,
  crossEntropy,
  linear,
  matmul,
  mul,
  relu,
  sum,
  type Tensor,
  tensor,
} from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';

interface Values {
  shape: number[];
  values: number[];
}
interface Run {
  output: number[];
  grads: number[][];
}
/** reference: torch's bfloat16 casts around float32 kernels; autocast: torch.autocast's own values. */
interface Case {
  inputs: Values[];
  upstream: Values;
  autocast: Run;
  reference: Run;
  target?: number[];
}
const fixture = JSON.parse(readFileSync(new URL('./fixtures/amp.json', import.meta.url), 'utf8')) as {
  autocastBf16: Record<string, Case>;
  /** Only `reference` (torch 1.13's CPU autocast has no float16); the same inputs as autocastBf16's. */
  autocastFp16: Record<string, Run>;
};

type Forward = (...xs: Tensor[]) => Tensor;
const mlp =
  (target: number[]): Forward =>
  (x, w1, b1, w2, b2) =>
    crossEntropy(linear(relu(linear(x, w1, b1)), w2, b2), target);
const forwards: Record<string, (c: Case) => Forward> = {
  matmul: () => (a, b) => matmul(a, b),
  linear: () => (x, w, b) => linear(x, w, b),
  conv2d: () => (x, w, b) => conv2d(x, w, b, { padding: 1 }),
  mlp: (c) => mlp(c.target!),
};

/** Output and input gradients of a fixture case, run under autocast(dtype) or, with null, in float32. */
async function run(name: string, dtype: AutocastDtype | null): Promise<Run> {
  const c = fixture.autocastBf16[name];
  const leaves = c.inputs.map((v) => tensor(v.values, v.shape, { requiresGrad: true }));
  const forward = forwards[name](c);
  const y = dtype ? autocast({ dtype }, () => forward(...leaves)) : forward(...leaves);
  const output = Array.from(y.data.dataSync());
  const upstream = tensor(c.upstream.values, c.upstream.shape);
  const loss = sum(mul(y, upstream));
  await loss.backward();
  const grads = leaves.map((l) => Array.from(l.grad!.dataSync()));
  for (const t of [...leaves, upstream, y, loss]) t.dispose();
  return { output, grads };
}

/**
 * |a − b| in units of dtype's spacing at b: 2^(exponent − 7) for bfloat16, 2^(exponent − 10) for float16 (2^-24 below
 * its normals).
 */
function ulps(a: number, b: number, dtype: AutocastDtype): number {
  const [bits, minExp] = dtype === 'bfloat16' ? [7, -126] : [10, -14];
  const exp = b === 0 ? minExp : Math.max(minExp, Math.floor(Math.log2(Math.abs(b))));
  return Math.abs(a - b) / 2 ** (exp - bits);
}

/** The largest ulp distance and the share of elements equal to torch's bit for bit. */
function compare(
  ours: number[],
  torch: number[],
  dtype: AutocastDtype = 'bfloat16',
): { maxUlps: number; exact: number } {
  const u = ours.map((v, i) => ulps(v, torch[i], dtype));
  return { maxUlps: Math.max(...u), exact: u.filter((x) => x === 0).length / u.length };
}

/** At most 1 ulp from torch anywhere, and equal bit for bit almost everywhere (float32 sums differ in order). */
function expectMatch(ours: number[], torch: number[], what: string, dtype: AutocastDtype = 'bfloat16'): void {
  const r = compare(ours, torch, dtype);
  expect(r.maxUlps, what).toBeLessThanOrEqual(1);
  expect(r.exact, what).toBeGreaterThan(0.95);
}

describe('autocast(bfloat16) against PyTorch', () => {
  for (const name of ['matmul', 'linear', 'conv2d', 'mlp']) {
    it(`${name}: output and input gradients are torch's bfloat16 casts around float32 kernels`, async () => {
      const c = fixture.autocastBf16[name];
      const ours = await run(name, 'bfloat16');
      // the mlp's output is its loss, a float32 op off autocast's list: float32 sums in another order may differ by an
      // ulp
      if (name === 'mlp') expect(ours.output[0]).toBeCloseTo(c.reference.output[0], 5);
      else expectMatch(ours.output, c.reference.output, 'output');
      c.reference.grads.forEach((g, i) => {
        expectMatch(ours.grads[i], g, `grad ${i}`);
      });
    });
  }

  it("equals torch.autocast('cpu', bfloat16) where its kernels accumulate in float32 (oneDNN: conv2d, linear forward)", async () => {
    const conv = fixture.autocastBf16.conv2d;
    const ours = await run('conv2d', 'bfloat16');
    expectMatch(ours.output, conv.autocast.output, 'conv2d output');
    conv.autocast.grads.forEach((g, i) => {
      expectMatch(ours.grads[i], g, `conv2d grad ${i}`);
    });
    expectMatch((await run('linear', 'bfloat16')).output, fixture.autocastBf16.linear.autocast.output, 'linear output');
    expect((await run('mlp', 'bfloat16')).output[0]).toBeCloseTo(fixture.autocastBf16.mlp.autocast.output[0], 5);
  });

  it('the comparison tells float32 from bfloat16: without autocast the same ops miss torch by many ulps', async () => {
    for (const name of ['matmul', 'linear', 'conv2d']) {
      const ours = await run(name, null);
      expect(compare(ours.output, fixture.autocastBf16[name].reference.output).exact, name).toBeLessThan(0.5);
    }
  });

  for (const name of ['matmul', 'linear', 'conv2d']) {
    it(`float16 ${name}: output and input gradients are torch's float16 casts around float32 kernels`, async () => {
      const want = fixture.autocastFp16[name];
      const ours = await run(name, 'float16');
      expectMatch(ours.output, want.output, 'output', 'float16');
      want.grads.forEach((g, i) => {
        expectMatch(ours.grads[i], g, `grad ${i}`, 'float16');
      });
      // and bfloat16 would not do: float16 keeps 3 more bits
      expect(compare((await run(name, 'bfloat16')).output, want.output, 'float16').exact).toBeLessThan(0.5);
    });
  }

  it('only inside the callback, and enabled: false turns it off within', () => {
    const a = tensor([1 + 2 ** -12, 1], [1, 2]);
    const b = tensor([1, 0], [2, 1]);
    const at = (f: () => Tensor) => f().data.dataSync()[0];
    expect(autocast({ dtype: 'bfloat16' }, () => at(() => matmul(a, b)))).toBe(1);
    expect(autocast({ dtype: 'float16' }, () => at(() => matmul(a, b)))).toBe(1);
    expect(autocast({}, () => autocast({ enabled: false }, () => at(() => matmul(a, b))))).toBe(1 + 2 ** -12);
    expect(at(() => matmul(a, b))).toBe(1 + 2 ** -12);
  });

  // probe CK: an inner autocast without a dtype took bfloat16 inside a float16 region (torch: the enclosing one's)
  it("an inner autocast without a dtype takes the enclosing one's, through a disabled region too", () => {
    const inFloat16 = (inner: () => AutocastDtype | null) => autocast({ dtype: 'float16' }, inner);
    expect(inFloat16(() => autocast({}, autocastDtype))).toBe('float16');
    expect(inFloat16(() => autocast({ enabled: false }, () => autocast({ enabled: true }, autocastDtype)))).toBe(
      'float16',
    );
    expect(inFloat16(() => autocast({ enabled: false }, autocastDtype))).toBeNull();
    expect(autocast({}, autocastDtype)).toBe('bfloat16');
  });

  it('linear of one sample [in] gives [out] as outside autocast, the row of a batch of one (was: a matmul rank error)', async () => {
    const w = tensor([0.5, -1.25, 2, 0.75, 1.5, -0.5], [2, 3]);
    const b = tensor([0.1, -0.3], [2]);
    const one = tensor([1.1, 2.3, -0.7], [3], { requiresGrad: true });
    const batch = tensor([1.1, 2.3, -0.7], [1, 3], { requiresGrad: true });
    for (const bias of [b, null]) {
      const [y1, yb] = autocast({ dtype: 'bfloat16' }, () => [linear(one, w, bias), linear(batch, w, bias)]);
      expect(y1.shape).toEqual([2]);
      expect([...y1.dataSync()]).toEqual([...yb.dataSync()]);
      await sum(y1).backward();
      await sum(yb).backward();
      expect([...(one.grad?.dataSync() ?? [])]).toEqual([...(batch.grad?.dataSync() ?? [])]);
      for (const t of [y1, yb, one.grad, batch.grad]) t?.dispose();
      one.grad = null;
      batch.grad = null;
    }
    for (const t of [w, b, one, batch]) t.dispose();
  });

  it('float16 overflows to inf above 65504 (what GradScaler guards against); bfloat16 does not', () => {
    const x = tensor([300], [1, 1]);
    const at = (dtype: 'float16' | 'bfloat16') => autocast({ dtype }, () => matmul(x, x).data.dataSync()[0]);
    expect(at('float16')).toBe(Number.POSITIVE_INFINITY);
    expect(at('bfloat16')).toBe(90112);
  });

  it('leaves no tensors behind across steps', async () => {
    await run('mlp', 'bfloat16');
    const before = tf.memory().numTensors;
    for (const name of ['matmul', 'linear', 'conv2d', 'mlp']) await run(name, 'bfloat16');
    expect(tf.memory().numTensors).toBe(before);
  });
});

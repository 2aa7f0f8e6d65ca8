import { tf, useNativeKernels } from '@ddp/tensor';
import { afterAll, describe, expect, it } from 'vitest';
import {
  gelu,
  l2Normalize,
  logSoftmax,
  matmul,
  maxPool2d,
  mean,
  min,
  mul,
  pad,
  pow,
  relu,
  slice,
  softmax,
  sum,
  type Tensor,
  tensor,
  zeros,
} from '../index.js';

// Crashes a differential fuzz against torch 1.13 found; the expected values are torch's for the same calls.
const values = (t: Tensor | tf.Tensor | null) => Array.from((t instanceof tf.Tensor ? t : t?.data)?.dataSync() ?? []);

const nativeBuilt = useNativeKernels(true);
afterAll(() => {
  useNativeKernels(true);
});

describe.each([false, true])('on the default backend, native kernels %s', (withNative) => {
  it.skipIf(withNative && !nativeBuilt)(
    'relu and gelu of a 0-d tensor, and their gradients (was RangeError on the native kernels)',
    async () => {
      useNativeKernels(withNative);
      const x = tensor(0.7, [], { requiresGrad: true });
      await relu(x).backward();
      const z = tensor(0.5, [], { requiresGrad: true });
      const y = gelu(z);
      const forward = [y.shape, y.item()];
      await y.backward();
      // torch.relu(tensor(0.7)).backward(): 1; F.gelu(tensor(0.5)) and its gradient
      expect([x.grad!.shape, values(x.grad)]).toEqual([[], [1]]);
      expect(forward[0]).toEqual([]);
      expect(forward[1]).toBeCloseTo(0.3457312285900116, 6);
      expect(values(z.grad)[0]).toBeCloseTo(0.8674951195716858, 6);
    },
  );

  it.skipIf(withNative && !nativeBuilt)(
    'reductions of empty rank-4 tensors give empty tensors (was: divide by zero trapped in wasm)',
    async () => {
      useNativeKernels(withNative);
      // torch: zeros(1, 0, 4, 4).sum([0, 2]) and .mean([0, 2]) are [0, 4]; zeros(1, 3, 0, 4).amin(1) [1, 0, 4]
      expect(sum(zeros([1, 0, 4, 4]), [0, 2]).shape).toEqual([0, 4]);
      expect(mean(zeros([1, 0, 4, 4]), [0, 2]).shape).toEqual([0, 4]);
      expect(min(zeros([1, 3, 0, 4]), 1).shape).toEqual([1, 0, 4]);
      expect(l2Normalize(zeros([0, 4, 1, 2]), 1).shape).toEqual([0, 4, 1, 2]);
      // torch: log_softmax(zeros(0, 3, 2, 2), 1).sum().backward() and softmax's: gradients [0, 3, 2, 2]
      for (const op of [logSoftmax, softmax]) {
        const x = zeros([0, 3, 2, 2], { requiresGrad: true });
        await sum(op(x, 1)).backward();
        expect(x.grad!.shape).toEqual([0, 3, 2, 2]);
      }
    },
  );
});

describe('edges a differential fuzz against torch found', () => {
  it('matmul over an empty inner dim with a rank-2 right operand: zeros (was: cannot infer -1 beside 0)', async () => {
    const a = zeros([1, 2, 0], { requiresGrad: true });
    const b = zeros([0, 3], { requiresGrad: true });
    const y = matmul(a, b);
    // torch.matmul(zeros(1, 2, 0), zeros(0, 3)): zeros [1, 2, 3]; gradients [1, 2, 0] and [0, 3]
    expect([y.shape, values(y)]).toEqual([[1, 2, 3], Array(6).fill(0)]);
    await sum(y).backward();
    expect([a.grad!.shape, b.grad!.shape]).toEqual([
      [1, 2, 0],
      [0, 3],
    ]);
  });

  it('pow with an empty output: gradients shaped as the operands (was: a size mismatch)', async () => {
    const a = zeros([0, 1], { requiresGrad: true });
    const b = zeros([1, 0, 1], { requiresGrad: true });
    await sum(pow(a, b)).backward();
    // torch.pow(zeros(0, 1), zeros(1, 0, 1)).sum().backward(): gradients [0, 1] and [1, 0, 1]
    expect([a.grad!.shape, b.grad!.shape]).toEqual([
      [0, 1],
      [1, 0, 1],
    ]);
    // torch.pow(zeros(1), zeros(1, 0)).sum().backward(): a's gradient is [0.], a sum over no term
    const c = zeros([1], { requiresGrad: true });
    await sum(pow(c, zeros([1, 0]))).backward();
    expect([c.grad!.shape, values(c.grad)]).toEqual([[1], [0]]);
  });

  it.each([
    // torch: softmax(tensor(-0.5), 0), log_softmax, F.normalize(dim=0), x[()], F.pad(x, []); (y * 2).backward()
    ['softmax', (x: Tensor) => softmax(x, 0), -0.5, 1, 0],
    ['softmax over dim -1', (x: Tensor) => softmax(x), -0.5, 1, 0],
    ['logSoftmax', (x: Tensor) => logSoftmax(x, 0), -0.5, 0, 0],
    ['l2Normalize', (x: Tensor) => l2Normalize(x, 0), -0.5, -1, 0],
    ['l2Normalize of 0 (the norm clamped to eps)', (x: Tensor) => l2Normalize(x, -1), 0, 0, 1999999991808],
    ['slice', (x: Tensor) => slice(x, [], []), -0.5, -0.5, 2],
    ['pad', (x: Tensor) => pad(x, []), -0.5, -0.5, 2],
  ] as const)(
    '%s of a 0-d tensor: torch value and gradient (was: tfjs refused a scalar)',
    async (_op, op, at, want, grad) => {
      const x = tensor(at, [], { requiresGrad: true });
      const y = op(x);
      expect([y.shape, y.item()]).toEqual([[], want]);
      await mul(y, 2).backward();
      expect([x.grad!.shape, values(x.grad)]).toEqual([[], [grad]]);
    },
  );

  it("max pool sends a NaN window's gradient to its last NaN, as torch's CPU kernel (was: the first)", async () => {
    const grad = async (data: number[], shape: number[], pool: (x: Tensor) => Tensor) => {
      const x = tensor(data, shape, { requiresGrad: true });
      await sum(pool(x)).backward();
      return values(x.grad);
    };
    const n = Number.NaN;
    // torch: F.max_pool2d(x, (1, 3)) of [nan, 1, nan]; F.max_pool2d(x, 2, stride=1) of a 3×3 with four NaNs;
    // F.max_pool2d(x, 2, stride=1, padding=1) of [[nan, nan], [2, nan]]; a tie [[5, 5], [1, 5]] keeps the first
    expect(await grad([n, 1, n], [1, 1, 1, 3], (x) => maxPool2d(x, [1, 3]))).toEqual([0, 0, 1]);
    expect(await grad([n, 1, n, 3, n, 4, n, 6, 7], [1, 1, 3, 3], (x) => maxPool2d(x, 2, { stride: 1 }))).toEqual([
      0, 0, 0, 0, 3, 0, 1, 0, 0,
    ]);
    const padded = (x: Tensor) => maxPool2d(x, 2, { stride: 1, padding: 1 });
    expect(await grad([n, n, 2, n], [1, 1, 2, 2], padded)).toEqual([2, 2, 1, 4]);
    expect(await grad([5, 5, 1, 5], [1, 1, 2, 2], (x) => maxPool2d(x, 2))).toEqual([1, 0, 0, 0]);
  });
});

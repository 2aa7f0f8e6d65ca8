import { describe, expect, it } from 'vitest';
import { max, min, tensor } from '../index.js';

/** The gradient of sum(reduce(x)) for x = [[3, 1, 3], [2, 2, 0]]. */
async function gradOf(reduce: (x: ReturnType<typeof tensor>) => ReturnType<typeof tensor>): Promise<number[]> {
  const x = tensor([3, 1, 3, 2, 2, 0], [2, 3], { requiresGrad: true });
  await reduce(x).sum().backward();
  return Array.from(x.grad?.dataSync() ?? []);
}

// torch 1.13: x.max(1)[0] / torch.amax(x, [1]) / x.min(0)[0] / x.max(), each .sum().backward()
// probe AH: `x.max(1)` split the gradient between tied maxima, where torch's gives it all to the first
describe('tied extremes: the gradient as torch gives it', () => {
  it("over one dim given as a number (torch.max(x, dim)'s values): all to the first tied extreme", async () => {
    expect(await gradOf((x) => x.max(1))).toEqual([1, 0, 0, 1, 0, 0]);
    expect(await gradOf((x) => max(x, { dim: 1, keepdim: true }))).toEqual([1, 0, 0, 1, 0, 0]);
    expect(await gradOf((x) => min(x, 0))).toEqual([0, 1, 0, 1, 0, 1]);
    const y = tensor([1, 1, 0, 1], [4], { requiresGrad: true });
    await y.max(0).backward();
    expect(Array.from(y.grad?.dataSync() ?? [])).toEqual([1, 0, 0, 0]);
  });

  // probe AS: a 0-d tensor's max(0) hung on wasm (tf.cumsum of a scalar), gradient 0 on cpu; a NaN maximum got none
  it("x.max(0) of a 0-d tensor is x, gradient 1; a NaN extreme takes the gradient, as torch.max(x, dim)'s", async () => {
    const s = tensor(3, [], { requiresGrad: true });
    const m = s.max(0);
    expect(m.item()).toBe(3);
    await m.backward();
    expect(s.grad?.dataSync()[0]).toBe(1);
    const x = tensor([1, Number.NaN, 3, 2, 5, 1], [2, 3], { requiresGrad: true });
    await max(x, 1).sum().backward();
    expect(Array.from(x.grad?.dataSync() ?? [])).toEqual([0, 1, 0, 0, 1, 0]);
  });

  it('over every dim or a list of dims (torch.amax, torch.max(x)): split evenly between ties', async () => {
    expect(await gradOf((x) => max(x, [1]))).toEqual([0.5, 0, 0.5, 0.5, 0.5, 0]);
    expect(await gradOf((x) => x.max())).toEqual([0.5, 0, 0.5, 0, 0, 0]);
  });

  // probe BV: max(x) / min(x) of a tensor holding a NaN gave NaN everywhere (no element equals a NaN extreme)
  it('over every dim with a NaN (torch.max(x), evenly_distribute_backward): the NaNs share it; amax gives NaN', async () => {
    const gradient = async (reduce: (x: ReturnType<typeof tensor>) => ReturnType<typeof tensor>) => {
      const x = tensor([1, Number.NaN, 3, Number.NaN, 5, 5], [2, 3], { requiresGrad: true });
      await reduce(x).sum().backward();
      return Array.from(x.grad?.dataSync() ?? []);
    };
    expect(await gradient((x) => x.max())).toEqual([0, 0.5, 0, 0.5, 0, 0]);
    expect(await gradient((x) => min(x))).toEqual([0, 0.5, 0, 0.5, 0, 0]);
    // torch 1.13: torch.amax(x, [0, 1]).backward() gives NaN everywhere (its mask, result == x, is all false)
    expect((await gradient((x) => max(x, [0, 1]))).every(Number.isNaN)).toBe(true);
  });
});

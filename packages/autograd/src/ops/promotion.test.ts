import { getBackend, setBackend } from '@ddp/tensor';
import { afterAll, describe, expect, it } from 'vitest';
import { AutogradArgumentError, add, cat, div, maskedFill, mul, pow, sum, tensor, where } from '../index.js';

const initial = getBackend();
afterAll(() => setBackend(initial as 'wasm'));

const values = (t: { dataSync(): ArrayLike<number> }) => Array.from(t.dataSync());
const ints = (v: number[]) => tensor(v, [v.length], { dtype: 'int32' });
const floats = (v: number[]) => tensor(v, [v.length]);
const bools = (v: boolean[]) => tensor(v, [v.length], { dtype: 'bool' });

// Each expectation is torch 1.13's answer (int32 tensors); before, each was another without an error.
describe.each(['wasm', 'cpu'] as const)("integer and mixed dtypes promote as torch's on %s", (backend) => {
  it('where and maskedFill over int32 give its values, not its bits read as float32', async () => {
    await setBackend(backend);
    const m = bools([false, true, false, false]);
    const filled = maskedFill(ints([5, 7, 3, 9]), m, -100);
    expect([filled.dtype, values(filled), sum(filled).item()]).toEqual(['int32', [5, -100, 3, 9], -83]); // was 2.4e-44
    const b = bools([true, false]);
    expect(values(where(b, ints([3, 4]), floats([0.5, 1.5])))).toEqual([3, 1.5]); // was [3, 1069547520]
    expect(values(where(b, floats([0.5, 1.5]), ints([3, 4])))).toEqual([0.5, 4]);
  });

  it('cat promotes to the widest dtype and keeps the gradient path', async () => {
    await setBackend(backend);
    const joined = cat([ints([3, 4]), floats([0.5, 1.5])]);
    expect([joined.dtype, values(joined)]).toEqual(['float32', [3, 4, 0.5, 1.5]]); // was int32 [3, 4, 0, 1]
    expect(values(cat([bools([true, false]), floats([0.5, 1.5])]))).toEqual([1, 0, 0.5, 1.5]);
    const w = tensor([1, 2], [2], { requiresGrad: true });
    const loss = add(sum(mul(cat([ints([3, 4]), w]), 2)), sum(w));
    await loss.backward();
    expect([loss.item(), values(w.grad!)]).toEqual([23, [3, 3]]); // was 18 and [1, 1]
  });

  it('int32 / int32 is true division; int32 with an integer stays int32, with a fraction goes float32', async () => {
    await setBackend(backend);
    expect(values(div(ints([7, -7, 5]), ints([2, 2, 2])))).toEqual([3.5, -3.5, 2.5]); // was [3, -4, 2]
    const kept = add(ints([16777217]), 0);
    expect([kept.dtype, values(kept)]).toEqual(['int32', [16777217]]); // was float32 16777216
    expect(values(add(ints([2147483647]), 1))).toEqual([-2147483648]); // int32 wraps, as torch's
    expect(values(mul(ints([3]), 0.5))).toEqual([1.5]);
  });

  // probe BV: the cpu backend's Math.pow gave NaN for pow(1, inf), pow(-1, inf), pow(1, NaN); torch (and C) give 1
  it('pow(±1, ±inf) and pow(1, NaN) are 1, and the exponent gets no NaN gradient from a base of 1', async () => {
    await setBackend(backend);
    const inf = Number.POSITIVE_INFINITY;
    const e = tensor([inf, -inf, Number.NaN, 2], [4], { requiresGrad: true });
    const y = pow(floats([1, -1, 1, 1]), e);
    expect(values(y)).toEqual([1, 1, 1, 1]);
    await sum(pow(1, e)).backward();
    expect(values(e.grad!)).toEqual([0, 0, 0, 0]);
    expect(values(pow(floats([1]), 3))).toEqual([1]);
  });

  it('an int32 leaf cannot be made to require grad', async () => {
    await setBackend(backend);
    expect(() => ints([1, 2]).requiresGrad_(true)).toThrow(AutogradArgumentError);
  });
});

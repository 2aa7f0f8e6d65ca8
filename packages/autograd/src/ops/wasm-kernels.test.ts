import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { AutogradArgumentError, abs, crossEntropy, maskedFill, sum, tensor, where } from '../index.js';

// On the default backend (wasm), tfjs 4.22's Sign was 0 for |x| < ~1e-6 and its cast to bool
// truncated to a byte; @ddp/tensor now runs both as the cpu backend does (wasm-fallbacks.ts).
describe('autograd ops over the wasm kernels that were wrong', () => {
  it("abs's gradient at small weights is ±1 as torch's (was 0: an L1 penalty stopped pulling them to 0)", async () => {
    const w = tensor([1e-7, -3e-7, 0, 2], [4], { requiresGrad: true });
    await sum(abs(w)).backward();
    expect(Array.from(w.grad!.dataSync())).toEqual([1, -1, 0, 1]);
  });

  it('a float mask, or an int32 one beyond 0 and 1, is refused as torch refuses it (a float mask was cast)', () => {
    const x = tensor([1, 2, 3, 4], [4]);
    const float = tf.tensor([0.5, 0, -2.5, 1e-7]);
    expect(() => maskedFill(x, float, -1)).toThrow(/maskedFill: the mask must be a bool tensor, got float32/);
    expect(() => where(float, x, 0)).toThrow(/where: the mask must be a bool tensor, got float32/);
    const two = tf.tensor([0, 2, 0, 1], undefined, 'int32');
    expect(() => maskedFill(x, two, -1)).toThrow(/int32 mask can take 0 and 1 values only, got 2/);
    expect(() => where(two, x, 0)).toThrow(AutogradArgumentError);
    // torch.masked_fill takes an integer 0/1 mask and a bool one alike
    const ints = tf.tensor([1, 0, 1, 0], undefined, 'int32');
    const bool = tf.tensor([true, false, true, false], undefined, 'bool');
    for (const mask of [ints, bool]) expect(Array.from(maskedFill(x, mask, -1).dataSync())).toEqual([-1, 2, -1, 4]);
    for (const t of [float, two, ints, bool]) t.dispose();
  });

  it('a fractional ignoreIndex is refused (equal to no label, it ignored nothing; torch wants an integer)', () => {
    const logits = tensor([1, 2, 3, 4], [2, 2]);
    expect(() => crossEntropy(logits, [0, 1], { ignoreIndex: 1.5 })).toThrow(/ignoreIndex must be an integer/);
    expect(crossEntropy(logits, [0, 1], { ignoreIndex: 1 }).dataSync()[0]).toBeCloseTo(1.3132616, 6);
  });
});

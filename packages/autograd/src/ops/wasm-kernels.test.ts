import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { abs, maskedFill, sum, tensor } from '../index.js';

// On the default backend (wasm), tfjs 4.22's Sign was 0 for |x| < ~1e-6 and its cast to bool
// truncated to a byte; @ddp/tensor now runs both as the cpu backend does (wasm-fallbacks.ts).
describe('autograd ops over the wasm kernels that were wrong', () => {
  it("abs's gradient at small weights is ±1 as torch's (was 0: an L1 penalty stopped pulling them to 0)", async () => {
    const w = tensor([1e-7, -3e-7, 0, 2], [4], { requiresGrad: true });
    await sum(abs(w)).backward();
    expect(Array.from(w.grad!.dataSync())).toEqual([1, -1, 0, 1]);
  });

  it('a float mask counts where it is not 0, as bool() in torch (was: 0.5 and 1e-7 false, -2.5 true as 254)', () => {
    const mask = tf.tensor([0.5, 0, -2.5, 1e-7]);
    const y = maskedFill(tensor([1, 2, 3, 4], [4]), mask, -1);
    expect(Array.from(y.dataSync())).toEqual([-1, 2, -1, -1]);
    mask.dispose();
  });
});

import { afterEach, describe, expect, it, vi } from 'vitest';
import { mse, tensor } from '../index.js';

afterEach(() => vi.restoreAllMocks());

// torch 1.13: F.mse_loss(ones(4, 1), arange(4.)) warns "Using a target size (torch.Size([4])) that
// is different to the input size (torch.Size([4, 1])) …" and returns 1.5 (the mean over every pair of [4, 4]).
describe('mse with a target of another shape than its input', () => {
  it('warns as torch (DDP_LOSS_BROADCAST) and gives torch its value; was silent', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const loss = mse(tensor([1, 1, 1, 1], [4, 1]), tensor([0, 1, 2, 3], [4]));
    expect(loss.item()).toBeCloseTo(1.5, 6);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0][0])).toMatch(
      /mse: the target's size \[4\] differs from the input's \[4,1\]; .* \[4,4\]/,
    );
    expect(warn.mock.calls[0][1]).toEqual({ code: 'DDP_LOSS_BROADCAST' });
    mse(tensor([1, 1, 1, 1], [4, 1]), tensor([0, 1, 2, 3], [4])); // once per shape pair
    mse(tensor([1, 1], [2]), tensor([2], [])); // a scalar target: torch warns too
    expect(warn).toHaveBeenCalledTimes(2);
  });

  it('says nothing when the shapes are equal', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    expect(mse(tensor([1, 2], [2, 1]), tensor([1, 4], [2, 1])).item()).toBe(2);
    expect(warn).not.toHaveBeenCalled();
  });
});

import { expect, it } from 'vitest';
import { pendingWriter, type Writes, whileWriting } from './backward-run.js';
import { AutogradError } from './errors.js';
import { mul, tensor } from './index.js';

/** Runs `fn` while an async operation named `what` writes `t` (its values or gradient), then lets it end. */
async function whileHeld(t: ReturnType<typeof tensor>, writes: Writes, fn: () => void): Promise<void> {
  let release = () => {};
  const held = whileWriting([t], 'opt.step()', writes, () => new Promise<void>((r) => (release = r)));
  try {
    fn();
  } finally {
    release();
    await held;
  }
}

// probe AD: a forward after `join()` (or a step, a load) not awaited read the weights of before, silently
it('an op reading a tensor whose values a running async operation writes: AutogradError naming it', async () => {
  const w = tensor([1, 2], [2], { requiresGrad: true });
  await whileHeld(w, 'values', () => {
    expect(() => mul(w, 2)).toThrow(AutogradError);
    expect(() => mul(w, 2)).toThrow(
      /mul.*argument 0 is still being written by a running opt\.step\(\) \(not awaited\)/i,
    );
  });
  expect(Array.from(mul(w, 2).data.dataSync())).toEqual([2, 4]); // once it ended
});

it('an op reading a tensor whose gradient only a running backward writes: allowed (its values are final)', async () => {
  const w = tensor([1, 2], [2], { requiresGrad: true });
  await whileHeld(w, 'gradients', () => {
    expect(Array.from(mul(w, 3).data.dataSync())).toEqual([3, 6]);
  });
});

it('the writing operation itself reads what it writes', async () => {
  const w = tensor([1, 2], [2], { requiresGrad: true });
  const read = await whileWriting([w], 'loadCheckpoint()', 'values', async () => Array.from(mul(w, 2).data.dataSync()));
  expect(read).toEqual([2, 4]);
});

// probe DE: inside `join`'s loop every check was off, so `opt.step(); opt.zeroGrad()` (torch's habit, a ZeRO step
// not awaited) zeroed the gradients the step still read: 0.18 off torch, silently
it('inside one writing operation, another started there and not awaited is still refused', async () => {
  const w = tensor([1, 2], [2], { requiresGrad: true });
  await whileWriting([w], 'join()', 'values', async () => {
    expect(Array.from(mul(w, 2).data.dataSync())).toEqual([2, 4]); // join's own loop reads what it writes
    let release = () => {};
    const step = whileWriting([w], 'opt.step()', 'values', () => new Promise<void>((r) => (release = r)));
    expect(() => mul(w, 2)).toThrow(/argument 0 is still being written by a running opt\.step\(\) \(not awaited\)/);
    expect(pendingWriter(w)).toBe('opt.step()');
    release();
    await step;
    expect(pendingWriter(w)).toBeNull();
  });
});

import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { transformer } from './test/models.js';
import { expectAllClose } from './test/utils.js';

/** One backward of the transformer: its gradients and the peak tf.memory().numBytes seen inside backward. */
async function gradsAndPeak(checkpointBlocks: boolean) {
  const model = transformer({ batch: 8, seq: 8, dim: 16, checkpointBlocks });
  let peak = 0;
  const sample = (): void => {
    peak = Math.max(peak, tf.memory().numBytes);
  };
  const hooks = model.params.map((p) => p.registerHook(() => sample()));
  const loss = model.loss();
  loss.registerHook(() => sample());
  await loss.backward();
  const grads = model.params.map((p) => Array.from(p.grad!.dataSync()));
  loss.dispose();
  for (const h of hooks) h.remove();
  model.dispose();
  return { grads, peak };
}

describe('checkpoint', () => {
  it('gives the plain gradients with a lower peak tensor memory on the transformer', async () => {
    const before = tf.memory().numTensors;
    const plain = await gradsAndPeak(false);
    const ckpt = await gradsAndPeak(true);
    for (const [i, g] of plain.grads.entries()) expectAllClose(ckpt.grads[i], g, 5);
    console.log(`peak numBytes inside backward: plain ${plain.peak}, checkpointed ${ckpt.peak}`);
    expect(ckpt.peak).toBeLessThan(plain.peak);
    expect(tf.memory().numTensors).toBe(before);
  });
});

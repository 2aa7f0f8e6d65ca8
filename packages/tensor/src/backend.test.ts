import { describe, expect, it } from 'vitest';
import { getBackend, setBackend, tf } from './index.js';

describe('backend selection', () => {
  it('is ready on import and switches on request', async () => {
    expect(['cpu', 'wasm', 'tensorflow']).toContain(getBackend());
    await setBackend('wasm');
    expect(getBackend()).toBe('wasm');
    expect(Array.from(await tf.add(tf.tensor([1, 2]), tf.tensor([3, 4])).data())).toEqual([4, 6]);
    await setBackend('cpu');
    expect(getBackend()).toBe('cpu');
  });
});

import { it } from 'vitest';
import { setBackend, tf } from '@ddp/tensor';
import { transformer, sgdStep } from './test-models.js';
it('x', async () => {
  for (const be of ['wasm', 'cpu'] as const) {
    await setBackend(be);
    const m = transformer({ batch: 8, seq: 32, dim: 64, vocab: 50 });
    const step = async () => { const l = m.loss(); await l.backward(); l.dispose(); sgdStep(m.params, 0.01); };
    for (let i = 0; i < 3; i++) await step();
    let t = performance.now();
    for (let i = 0; i < 10; i++) await step();
    const stepMs = (performance.now() - t) / 10;
    t = performance.now();
    for (let i = 0; i < 10; i++) { const l = m.loss(); l.dispose(); }
    const fwdMs = (performance.now() - t) / 10;
    console.log(be, 'step ms', stepMs.toFixed(1), 'forward ms', fwdMs.toFixed(1), tf.memory().numTensors);
    m.dispose();
  }
}, 120000);

import { fromTf } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { expect, it } from 'vitest';
import { Linear } from '../layers/linear.js';
import { clipGradNorm } from './clip-grad.js';
import { OptimizerError } from './optimizer.js';
import { SGD } from './sgd.js';

// torch's backward is synchronous; ddp's returns a promise. Not awaited, step() stepped the gradients that
// were not there yet: the weights stayed where they were, silently
it('step, zeroGrad and clipGradNorm refuse gradients a backward not awaited still computes; a hook may step', async () => {
  const layer = new Linear(3, 2);
  const opt = new SGD(layer.parameters(), { lr: 0.1 });
  const x = fromTf(tf.ones([4, 3]));
  const before = [...layer.weight.data.dataSync()];
  const running = layer.forward(x).sum().backward();
  expect(() => opt.step()).toThrow(OptimizerError);
  expect(() => opt.step()).toThrow(
    /parameter 0's gradient is still being computed .* await loss\.backward\(\) before step/,
  );
  expect(() => opt.zeroGrad()).toThrow(/before zeroGrad\(\)/);
  expect(() => clipGradNorm(layer.parameters(), 1)).toThrow(/before clipGradNorm/);
  expect([...layer.weight.data.dataSync()]).toEqual(before);
  await running;
  opt.step();
  expect([...layer.weight.data.dataSync()]).not.toEqual(before);
  opt.zeroGrad();
  // torch's optimizer-in-backward: a post-accumulate hook steps its own parameter while backward runs
  const perParameter = new Map(layer.parameters().map((p) => [p, new SGD([p], { lr: 0.1 })]));
  for (const p of layer.parameters()) p.registerPostAccumulateGradHook((q) => perParameter.get(q)!.step());
  const stepped = [...layer.weight.data.dataSync()];
  await layer.forward(x).sum().backward();
  expect([...layer.weight.data.dataSync()]).not.toEqual(stepped);
  x.dispose();
});

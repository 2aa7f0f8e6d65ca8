import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fromTf } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { expect, it } from 'vitest';
import { loadCheckpoint, saveCheckpoint } from '../checkpoint.js';
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
    /parameter 0 is still being written by a running loss\.backward\(\) .* await loss\.backward\(\) before step/,
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

// probe X: not awaited, the load landed after the steps taken meanwhile and overwrote them; a module's zeroGrad
// during a running backward cleared half its gradients
it('a load not awaited is refused by the step taken meanwhile; Module.zeroGrad refuses a running backward', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'ddp-pending-'));
  const layer = new Linear(3, 2);
  const opt = new SGD(layer.parameters(), { lr: 0.1 });
  await saveCheckpoint(dir, { model: layer, step: 1 });
  const x = fromTf(tf.ones([4, 3]));
  await layer.forward(x).sum().backward();
  const loading = loadCheckpoint(dir, { model: layer }); // not awaited: still reading when the step comes
  expect(() => opt.step()).toThrow(/still being written by a running loadCheckpoint\(\) .* await loadCheckpoint\(\)/);
  await loading;
  opt.step();
  const running = layer.forward(x).sum().backward();
  expect(() => layer.zeroGrad()).toThrow(/zeroGrad\(\): loss\.backward\(\) still runs \(not awaited\)/);
  await running;
  x.dispose();
  await rm(dir, { recursive: true, force: true });
});

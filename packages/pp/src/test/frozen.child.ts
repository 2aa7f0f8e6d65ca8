// One data-parallel replica of grad-sync.multiprocess.test.ts: three same-shaped parameters, the
// ones named in argv (by replica: "1/2" freezes parameter 1 on rank 0 and 2 on rank 1; "-/1" only
// parameter 1 on rank 1); "unused": none frozen, parameter 0 with no gradient anywhere, parameter 1 with one on
// rank 1 only. Prints allReduceGradients' error, if any, and the gradients (null where none).
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Parameter } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { allReduceGradients } from '../index.js';

const group = await initProcessGroup({ timeoutMs: 10_000 });
const unused = process.argv[2] === 'unused';
const frozen = unused ? -1 : Number(process.argv[2].split('/')[group.rank]);
const params = [0, 1, 2].map((i) => new Parameter(tf.fill([2], i + 1), i !== frozen));
for (const [i, p] of params.entries())
  if (p.requiresGrad && !(unused && (i === 0 || (i === 1 && group.rank === 0)))) p.grad = tf.fill([2], group.rank + 1);
let error: string | null = null;
try {
  await allReduceGradients(params, group);
  await allReduceGradients(params, group); // the layout is checked once, not per step
} catch (e) {
  error = `${(e as Error).name}: ${(e as Error).message}`;
}
const grads = params.map((p) => (p.grad ? [...p.grad.dataSync()] : null));
console.log(`RESULT ${JSON.stringify({ rank: group.rank, error, grads })}`);
await destroyProcessGroup();

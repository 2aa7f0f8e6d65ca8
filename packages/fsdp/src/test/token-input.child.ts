// One rank of token-input.multiprocess.test.ts: args = the wrapping ('root' | 'units').
import { crossEntropy, type Tensor, tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Embedding, Generator, Linear, Sequential, SGD } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { fullyShard } from '../index.js';

/**
 * A model whose first layer takes token ids (Embedding, then Linear), under FSDP wrapped at the root
 * only or with the embedding as a unit of its own, trained 3 steps with SGD against the same model in
 * this process on the global batch. Prints RESULT { maxDiff, error }.
 */
const wrapping = process.argv[2] as 'root' | 'units';
const group = await initProcessGroup({ timeoutMs: 30_000 });
const build = () => {
  const gen = new Generator(4);
  return new Sequential(new Embedding(7, 5, { generator: gen }), new Linear(5, 3, { generator: gen }));
};
const [model, ref] = [build(), build()];
if (wrapping === 'units') fullyShard(model.at(0), { processGroup: group });
const root = fullyShard(model, { processGroup: group });
const [opt, refOpt] = [new SGD(root.parameters(), { lr: 0.5 }), new SGD(ref.parameters(), { lr: 0.5 })];
/** Token ids [to − from, 2] of step t, an int32 tensor (as a tokenizer's batch). */
const ids = (t: number, from: number, to: number): Tensor =>
  tensor(
    Array.from({ length: to - from }, (_, i) => [(3 * (from + i) + t) % 7, (from + i + 2 * t) % 7]).flat(),
    [to - from, 2],
    { dtype: 'int32' },
  );
const labels = (t: number, from: number, to: number) =>
  tf.tensor1d(
    Array.from({ length: 2 * (to - from) }, (_, i) => (2 * from + i + t) % 3),
    'int32',
  );
const lossOf = (out: ReturnType<typeof ref.forward>, t: number, from: number, to: number) => {
  const y = labels(t, from, to);
  const loss = tidy(() => crossEntropy(out.reshape(-1, 3), y));
  y.dispose();
  return loss;
};
let error: string | null = null;
try {
  const [from, to] = [group.rank * 2, group.rank * 2 + 2];
  for (let t = 0; t < 3; t++) {
    const batch = ids(t, from, to);
    const out = await root.forward(batch);
    batch.dispose();
    const loss = lossOf(out, t, from, to);
    out.dispose();
    await loss.backward();
    opt.step();
    opt.zeroGrad();
    const whole = ids(t, 0, 2 * group.size);
    const refOut = tidy(() => ref.forward(whole as never));
    whole.dispose();
    const refLoss = lossOf(refOut, t, 0, 2 * group.size);
    refOut.dispose();
    await refLoss.backward();
    refOpt.step();
    refOpt.zeroGrad();
  }
} catch (e) {
  error = `${(e as Error).name}: ${(e as Error).message}`;
}
const full = await root.summonFullParams(() => model.parameters().map((p) => Array.from(p.dataSync())));
const want = ref.parameters().map((p) => Array.from(p.dataSync()));
const maxDiff = Math.max(...full.flatMap((p, i) => p.map((v, j) => Math.abs(v - want[i][j]))));
console.log(`RESULT ${JSON.stringify({ maxDiff, error })}`);
await destroyProcessGroup();

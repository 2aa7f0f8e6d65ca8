// One rank of token-input.multiprocess.test.ts: args = the wrapping ('root' | 'units'), the inputs ('ids' | 'masked').
import { crossEntropy, type Tensor, tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Embedding, Generator, Linear, Module, SGD } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { fullyShard } from '../index.js';

/** An embedding whose output a float mask zeroes, read without gradient (a padding mask). */
class MaskedEmbedding extends Module {
  readonly emb: Embedding;
  constructor(gen: Generator) {
    super();
    this.emb = this.registerModule('emb', new Embedding(7, 5, { generator: gen }));
  }
  forward(ids: Tensor, mask?: Tensor): Tensor {
    const e = this.emb.forward(ids);
    return mask ? e.mul(mask.detach()) : e;
  }
}

class TokenModel extends Module {
  readonly embed: MaskedEmbedding;
  readonly head: Linear;
  constructor() {
    super();
    const gen = new Generator(4);
    this.embed = this.registerModule('embed', new MaskedEmbedding(gen));
    this.head = this.registerModule('head', new Linear(5, 3, { generator: gen }));
  }
  forward(ids: Tensor, mask?: Tensor): Tensor {
    return this.head.forward(this.embed.forward(ids, mask));
  }
}

/**
 * A model whose first layer takes token ids (and, 'masked', a float mask that gets no gradient), under FSDP
 * wrapped at the root only or with the embedding as a unit of its own, trained 3 steps with SGD against the
 * same model in this process on the global batch. Prints RESULT { maxDiff, error }.
 */
const [wrapping, inputs] = process.argv.slice(2) as ['root' | 'units', 'ids' | 'masked'];
const group = await initProcessGroup({ timeoutMs: 30_000 });
const [model, ref] = [new TokenModel(), new TokenModel()];
if (wrapping === 'units') fullyShard(model.embed, { processGroup: group });
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
/** A float mask [to − from, 2, 1] of step t: ones but for one token. */
const maskOf = (t: number, from: number, to: number): Tensor | undefined =>
  inputs === 'masked'
    ? tensor(
        Array.from({ length: 2 * (to - from) }, (_, i) => ((2 * from + i + t) % 4 === 0 ? 0 : 1)),
        [to - from, 2, 1],
      )
    : undefined;
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
    const [batch, mask] = [ids(t, from, to), maskOf(t, from, to)];
    const out = await root.forward(batch, mask);
    batch.dispose();
    mask?.dispose();
    const loss = lossOf(out, t, from, to);
    out.dispose();
    await loss.backward();
    opt.step();
    opt.zeroGrad();
    const [whole, wholeMask] = [ids(t, 0, 2 * group.size), maskOf(t, 0, 2 * group.size)];
    const refOut = tidy(() => ref.forward(whole, wholeMask));
    whole.dispose();
    wholeMask?.dispose();
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

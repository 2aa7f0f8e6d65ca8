import { embedding, noGrad, tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { Generator } from '../generator.js';
import { ModuleError } from '../module.js';
import { SGD } from '../optim/sgd.js';
import { Embedding } from './linear.js';

const rows = (t: { dataSync(): ArrayLike<number> }, width: number) => {
  const v = Array.from(t.dataSync());
  return Array.from({ length: v.length / width }, (_, i) => v.slice(i * width, (i + 1) * width));
};
const table = () => tf.div(tf.reshape(tf.range(0, 12, 1, 'float32'), [4, 3]), 10);

// Expected values from torch 1.13: nn.Embedding(4, 3, padding_idx=-1) with weight arange(12)/10,
// ids [[3,1,3],[0,3,2]], loss (y * arange(18).view(2,3,3)).sum().
describe("Embedding's paddingIdx (torch's padding_idx)", () => {
  it('zeroes the padding row at init and leaves the other rows as without it; negative counts from the end', () => {
    const plain = new Embedding(4, 3, { generator: new Generator(1) });
    const padded = new Embedding(4, 3, { paddingIdx: -1, generator: new Generator(1) });
    expect(padded.paddingIdx).toBe(3);
    const want = rows(plain.weight.data, 3);
    want[3] = [0, 0, 0];
    expect(rows(padded.weight.data, 3)).toEqual(want);
  });

  it("gives the padding row no gradient, whatever its value, as torch's", async () => {
    const emb = new Embedding(4, 3, { paddingIdx: -1 });
    noGrad(() => emb.weight.data.dispose());
    emb.weight.data = table();
    const y = emb.forward([
      [3, 1, 3],
      [0, 3, 2],
    ]);
    expect(rows(y, 3)[0]).toEqual([0.9, 1, 1.1].map(Math.fround)); // the row's value is still returned
    await y
      .mul(
        tensor(
          Array.from({ length: 18 }, (_, i) => i),
          [2, 3, 3],
        ),
      )
      .sum()
      .backward();
    expect(rows(emb.weight.grad!, 3)).toEqual([
      [9, 10, 11],
      [3, 4, 5],
      [15, 16, 17],
      [0, 0, 0],
    ]);
    // SGD leaves the zero padding row at zero, as torch's: a padding id never moves it
    const zeroed = new Embedding(4, 3, { paddingIdx: 0 });
    await zeroed.forward([0, 0, 1]).sum().backward();
    new SGD(zeroed.parameters(), { lr: 1, momentum: 0.9, weightDecay: 0.1 }).step();
    expect(rows(zeroed.weight.data, 3)[0]).toEqual([0, 0, 0]);
  });

  it('the functional embedding takes paddingIdx too (F.embedding)', async () => {
    const w = tensor(Array.from(table().dataSync()), [4, 3], { requiresGrad: true });
    await embedding([1, 1, 2], w, { paddingIdx: 1 }).sum().backward();
    expect(rows(w.grad!, 3)).toEqual([
      [0, 0, 0],
      [0, 0, 0],
      [1, 1, 1],
      [0, 0, 0],
    ]);
    expect(() => embedding([0], w, { paddingIdx: 4 })).toThrow(
      /embedding: paddingIdx 4 must be an integer in \[-4, 4\)/,
    );
  });

  it('refuses a paddingIdx outside [-n, n) or fractional, as torch', () => {
    for (const p of [4, -5, 1.5, Number.NaN]) {
      expect(() => new Embedding(4, 3, { paddingIdx: p }), String(p)).toThrow(ModuleError);
    }
    expect(() => new Embedding(4, 3, { paddingIdx: -4 })).not.toThrow();
  });
});

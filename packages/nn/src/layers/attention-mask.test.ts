import { fromTf, tidy } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { ModuleError } from '../module.js';
import { loadFixture, maxAbsDiff } from '../test/fixtures.js';
import { MultiheadAttention } from './attention.js';

interface MaskGolden {
  sd: Record<'in_proj_weight' | 'in_proj_bias' | 'out_proj.weight' | 'out_proj.bias', number[]>;
  x: number[];
  bias: number[];
  bool: boolean[];
  b3: number[];
  y1: number[];
  y2: number[];
  y3: number[];
  bh: number[];
  y4: number[];
}

// torch 1.13 (fixtures/make_mha_masks_fixture.py): a float attn_mask is added to the scores, a
// bool one blocks where true. Was: every mask cast to bool, so a float bias blocked each
// position whose bias was not 0 (and let the 0 ones through at full weight).
describe("MultiheadAttention's attnMask as torch's", () => {
  const g = loadFixture<MaskGolden>('mha_masks');
  const build = () => {
    const mha = new MultiheadAttention(4, 2);
    const state = {
      in_proj_weight: tf.tensor(g.sd.in_proj_weight, [12, 4]),
      in_proj_bias: tf.tensor(g.sd.in_proj_bias, [12]),
      'out_proj.weight': tf.tensor(g.sd['out_proj.weight'], [4, 4]),
      'out_proj.bias': tf.tensor(g.sd['out_proj.bias'], [4]),
    };
    mha.loadStateDict(state);
    tf.dispose(Object.values(state));
    return mha;
  };
  const run = (mha: MultiheadAttention, attnMask: tf.Tensor) => {
    const x = fromTf(tf.tensor(g.x, [2, 3, 4]));
    const y = tidy(() => mha.forward(x, x, x, { attnMask }));
    const out = Array.from(y.dataSync());
    y.dispose();
    x.dispose();
    return out;
  };

  it('adds a float mask [T, S] or [B, T, S] to the scores, blocks where a bool mask is true', () => {
    const mha = build();
    const masks = [
      tf.tensor(g.bias, [3, 3]),
      tf.tensor(g.bool.map(Number), [3, 3], 'bool'),
      tf.tensor(g.b3, [2, 3, 3]),
    ];
    const before = tf.memory().numTensors;
    const [y1, y2, y3] = masks.map((m) => run(mha, m));
    expect(maxAbsDiff(y1, g.y1)).toBeLessThan(1e-5);
    expect(maxAbsDiff(y2, g.y2)).toBeLessThan(1e-5);
    expect(maxAbsDiff(y3, g.y3)).toBeLessThan(1e-5);
    expect(tf.memory().numTensors).toBe(before);
    expect(masks.every((m) => !m.isDisposed)).toBe(true); // the caller's masks are left alone
    tf.dispose(masks);
    mha.dispose();
  });

  it("takes the masks as autograd Tensors too (was: tfjs's untyped reshape error); a float one gets its gradient", async () => {
    const mha = build();
    const masks = [
      fromTf(tf.tensor(g.bias, [3, 3])),
      fromTf(tf.tensor(g.bool.map(Number), [3, 3], 'bool')),
      fromTf(tf.tensor(g.b3, [2, 3, 3]), { requiresGrad: true }),
    ];
    const [y1, y2] = masks.slice(0, 2).map((m) => run(mha, m as never));
    expect(maxAbsDiff(y1, g.y1)).toBeLessThan(1e-5);
    expect(maxAbsDiff(y2, g.y2)).toBeLessThan(1e-5);
    const x = fromTf(tf.tensor(g.x, [2, 3, 4]));
    const y = mha.forward(x, x, x, { attnMask: masks[2] });
    expect(maxAbsDiff(Array.from(y.dataSync()), g.y3)).toBeLessThan(1e-5);
    await y.square().sum().backward();
    expect(masks[2].grad?.shape).toEqual([2, 3, 3]);
    for (const t of [x, y, ...masks]) t.dispose();
    mha.dispose();
  });

  // probe BX: any shape that broadcast was taken: a [B, S, 1] padding bias (unsqueezed the wrong way) biased
  // queries instead of keys, silently; torch refuses each. Its own 3-D layout is [B·H, T, S]
  it("takes torch's [B·H, T, S] layout, and refuses a mask of another shape", () => {
    const mha = build();
    const perHead = tf.tensor(g.bh, [4, 3, 3]);
    expect(maxAbsDiff(run(mha, perHead), g.y4)).toBeLessThan(1e-5);
    const asFour = tf.reshape(perHead, [2, 2, 3, 3]);
    expect(maxAbsDiff(run(mha, asFour), g.y4)).toBeLessThan(1e-5);
    // a 1 for the batch, head or target dim broadcasts (a key-padding mask [B, 1, S] or [B, 1, 1, S])
    const padding = tf.tensor([0, -1e9, 0, 0, 0, -1e9], [2, 1, 3]);
    const expanded = tf.tile(padding, [1, 3, 1]);
    const want = run(mha, expanded);
    for (const m of [padding, tf.reshape(padding, [2, 1, 1, 3])]) expect(maxAbsDiff(run(mha, m), want)).toBe(0);
    for (const shape of [[2, 3, 1], [3, 1], [3], [3, 3, 3], [2, 3, 3, 1]]) {
      const mask = tf.zeros(shape);
      expect(() => run(mha, mask), `[${shape}]`).toThrow(/MultiheadAttention: attnMask is \[.*\]; it must be \[3, 3\]/);
      mask.dispose();
    }
    tf.dispose([padding, expanded]);
    tf.dispose([perHead, asFour]);
    mha.dispose();
  });

  it('refuses an int mask, as torch: a 0/1 "attend here" mask would block where it allows', () => {
    const mha = build();
    const mask = tf.ones([3, 3], 'int32');
    expect(() => run(mha, mask)).toThrow(ModuleError);
    mask.dispose();
    mha.dispose();
  });

  it("refuses call options it does not have (torch's key_padding_mask, a mask in the options' place)", () => {
    // before: each was ignored and the output was the unmasked one
    const mha = new MultiheadAttention(4, 2);
    const x = fromTf(tf.randomNormal([1, 3, 4], 0, 1, 'float32', 1));
    const mask = tf.tensor([[false, false, true]], [1, 3], 'bool');
    for (const options of [{ keyPaddingMask: mask }, { key_padding_mask: mask }, { is_causal: true }]) {
      expect(() => mha.forward(x, x, x, options as never)).toThrow(ModuleError);
    }
    expect(() => mha.forward(x, x, x, mask as never)).toThrow(/pass a mask as \{ attnMask \}/);
    mha.dispose();
  });
});

// were: an untyped TypeError (options as key), "linear: operands must be float32, got undefined" (as value)
it('options given where key or value go: ModuleError saying to pass them fourth', () => {
  const mha = new MultiheadAttention(4, 2);
  const x = fromTf(tf.ones([1, 3, 4]));
  expect(() => mha.forward(x, { isCausal: true } as never)).toThrow(ModuleError);
  expect(() => mha.forward(x, x, { isCausal: true } as never)).toThrow(
    /MultiheadAttention.forward: value must be a Tensor, got Object; pass the options fourth/,
  );
  tidy(() => mha.forward(x, x, x, { isCausal: true })).dispose();
  x.dispose();
});

// probe BX: a key batch of 1 was broadcast to every query batch (torch raises)
it('a key or value of another batch, length or width than the query and key: ModuleError', () => {
  const mha = new MultiheadAttention(4, 2);
  const q = fromTf(tf.ones([2, 3, 4]));
  const kv = fromTf(tf.ones([1, 5, 4]));
  const other = fromTf(tf.ones([2, 5, 4]));
  expect(() => mha.forward(q, kv, kv)).toThrow(/key is \[1,5,4\]; .* it must be \[2, 5, 4\]/);
  expect(() => mha.forward(q, other, q)).toThrow(/value is \[2,3,4\]; .* it must be \[2, 5, 4\]/);
  tidy(() => mha.forward(q, other, other)).dispose();
  for (const t of [q, kv, other]) t.dispose();
  mha.dispose();
});

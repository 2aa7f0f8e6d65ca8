import { fromTf, Tensor, tidy } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { Generator } from './generator.js';
import { Dropout, ReLU } from './layers/activation.js';
import { ModuleList, Sequential } from './layers/container.js';
import { Conv2d, MaxPool2d } from './layers/conv.js';
import { Embedding, Linear } from './layers/linear.js';
import { BatchNorm2d } from './layers/norm.js';
import { Module, ModuleError, StateDictError } from './module.js';
import { Parameter } from './parameter.js';

function net(seed: number) {
  const g = new Generator(seed);
  return new Sequential(
    new Conv2d(2, 4, 3, { padding: 1, generator: g }),
    new BatchNorm2d(4),
    new ReLU(),
    new MaxPool2d(2),
  );
}

describe('Module', () => {
  it('lists parameters, buffers and modules in registration order', () => {
    const m = net(0);
    expect(m.namedParameters().map(([k]) => k)).toEqual(['0.weight', '0.bias', '1.weight', '1.bias']);
    expect(m.namedBuffers().map(([k]) => k)).toEqual(['1.running_mean', '1.running_var', '1.num_batches_tracked']);
    expect(m.namedModules().next().value?.[0]).toBe('');
    expect([...m.namedModules()].map(([k]) => k)).toEqual(['', '0', '1', '2', '3']);
    expect([...m.stateDict().keys()]).toEqual([
      '0.weight',
      '0.bias',
      '1.weight',
      '1.bias',
      '1.running_mean',
      '1.running_var',
      '1.num_batches_tracked',
    ]);
    m.dispose();
  });

  it('replaceModule swaps a child in place: registration order, fields and ModuleList items follow', () => {
    class Net extends Module {
      readonly body = this.registerModule('body', new Sequential(new Linear(2, 2), new ReLU()));
      head = this.registerModule('head', new Linear(2, 1));
      forward(): void {}
    }
    const m = new Net();
    const [oldHead, oldFirst] = [m.head, m.body.at(0)];
    const [head, first] = [new Linear(2, 3), new Linear(2, 2)];
    expect(m.replaceModule('head', head)).toBe(oldHead);
    expect(m.body.replaceModule('0', first)).toBe(oldFirst);
    expect(m.head).toBe(head);
    expect([...m.body][0]).toBe(first);
    const modules = [...m.namedModules()];
    expect(modules.map(([k]) => k)).toEqual(['', 'body', 'body.0', 'body.1', 'head']);
    expect(modules[2][1]).toBe(first);
    expect(modules[4][1]).toBe(head);
    expect(m.namedParameters().map(([k, p]) => [k, p.shape])).toEqual([
      ['body.0.weight', [2, 2]],
      ['body.0.bias', [2]],
      ['head.weight', [3, 2]],
      ['head.bias', [3]],
    ]);
    expect(() => m.replaceModule('tail', head)).toThrow(ModuleError);
    for (const x of [m, oldHead, oldFirst]) x.dispose();
  });

  it('lists a shared parameter once', () => {
    const shared = new Linear(3, 3);
    const list = new ModuleList([shared, new ReLU(), shared]);
    expect(list.parameters()).toHaveLength(2);
    expect(list.length).toBe(3);
    list.dispose();
  });

  it('switches train/eval recursively and applies fn children first', () => {
    const m = net(0);
    m.eval();
    expect(m.modules().every((x) => !x.training)).toBe(true);
    m.train();
    expect(m.modules().every((x) => x.training)).toBe(true);
    const order: string[] = [];
    m.apply((x: Module) => order.push(x.constructor.name));
    expect(order).toEqual(['Conv2d', 'BatchNorm2d', 'ReLU', 'MaxPool2d', 'Sequential']);
    m.dispose();
  });

  // fn ran on the shared Linear twice (once per name): an init applied that way was applied twice
  it('apply and children reach a child registered twice under one parent once, as torch', () => {
    const shared = new Linear(1, 1, { bias: false });
    const list = new ModuleList([shared, new ReLU(), shared]);
    const order: string[] = [];
    list.apply((x: Module) => order.push(x.constructor.name));
    // torch: ModuleList([s, ReLU(), s]).apply(f) -> f on Linear, ReLU, ModuleList; len(list(children())) == 2
    expect(order).toEqual(['Linear', 'ReLU', 'ModuleList']);
    expect([...list.namedChildren()].map(([k]) => k)).toEqual(['0', '1']);
    expect(list.children()).toEqual([shared, list.at(1)]);
    expect([...list.stateDict().keys()]).toEqual(['0.weight', '2.weight']);
    list.dispose();
  });

  it('builds identical weights from identically seeded generators (every rank alike)', () => {
    const [a, b, c] = [net(7), net(7), net(8)];
    const values = (m: Module) => m.parameters().flatMap((p) => Array.from(p.dataSync()));
    expect(values(a)).toEqual(values(b));
    expect(values(a)).not.toEqual(values(c));
    for (const m of [a, b, c]) m.dispose();
  });

  it('loadStateDict names missing, unexpected and mis-shaped keys and changes nothing on error', () => {
    const m = net(0);
    const before = Array.from(m.parameters()[0]?.dataSync() ?? []);
    const state = new Map(m.stateDict());
    state.delete('1.running_var');
    const extra = tf.zeros([2]);
    const wrong = tf.zeros([4, 2, 5, 5]);
    state.set('2.weight', extra);
    state.set('0.weight', wrong);
    let error: unknown;
    try {
      m.loadStateDict(state);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(StateDictError);
    expect((error as StateDictError).missingKeys).toEqual(['1.running_var']);
    expect((error as StateDictError).unexpectedKeys).toEqual(['2.weight']);
    expect((error as Error).message).toMatch(/0\.weight: checkpoint \[4, 2, 5, 5\], model \[4, 2, 3, 3\]/);
    expect(Array.from(m.parameters()[0]?.dataSync() ?? [])).toEqual(before);
    state.set('0.weight', m.stateDict().get('0.weight') as tf.Tensor);
    expect(m.loadStateDict(state, false)).toEqual({ missingKeys: ['1.running_var'], unexpectedKeys: ['2.weight'] });
    tf.dispose([extra, wrong]);
    m.dispose();
  });

  it('zeroGrad drops gradients', async () => {
    const m = new Linear(3, 2, { generator: new Generator(1) });
    const x = fromTf(tf.ones([4, 3]));
    const loss = tidy(() => m.forward(x).sum());
    await loss.backward();
    expect(m.weight.grad).not.toBeNull();
    m.zeroGrad();
    expect(m.parameters().every((p) => p.grad === null)).toBe(true);
    for (const t of [x, loss]) t.dispose();
    m.dispose();
  });
});

describe('layers', () => {
  it('Conv2d/MaxPool2d/Linear produce PyTorch shapes; Linear takes extra leading dims', () => {
    const m = net(0);
    const x = fromTf(tf.randomNormal([2, 2, 6, 6], 0, 1, 'float32', 1));
    const y = tidy(() => m.forward(x));
    expect(y.shape).toEqual([2, 4, 3, 3]);
    const lin = new Linear(5, 7);
    const z = fromTf(tf.zeros([2, 3, 5]));
    const out = tidy(() => lin.forward(z));
    expect(out.shape).toEqual([2, 3, 7]);
    for (const t of [x, y, z, out]) t.dispose();
    m.dispose();
    lin.dispose();
  });

  it('Embedding looks up rows; init is N(0, 1)', () => {
    const emb = new Embedding(10, 4, { generator: new Generator(2) });
    const y = tidy(() =>
      emb.forward([
        [1, 2],
        [3, 1],
      ]),
    );
    expect(y.shape).toEqual([2, 2, 4]);
    const rows = emb.weight.arraySync() as number[][];
    expect((y.arraySync() as number[][][])[1]?.[1]).toEqual(rows[1]);
    y.dispose();
    emb.dispose();
  });

  it('Dropout drops in training, is the identity in eval, and replays from the generator state', () => {
    const g = new Generator(4);
    const drop = new Dropout(0.5, { generator: g });
    const x = fromTf(tf.ones([200]));
    const state = g.getState();
    const a = tidy(() => drop.forward(x));
    g.setState(state);
    const b = tidy(() => drop.forward(x));
    expect(Array.from(a.dataSync())).toEqual(Array.from(b.dataSync()));
    const kept = Array.from(a.dataSync()).filter((v) => v !== 0);
    expect(kept.every((v) => v === 2)).toBe(true);
    expect(kept.length).toBeGreaterThan(60);
    expect(kept.length).toBeLessThan(140);
    drop.eval();
    const c = tidy(() => drop.forward(x));
    expect(Array.from(c.dataSync())).toEqual(Array.from(x.dataSync()));
    for (const t of [x, a, b, c]) t.dispose();
  });
});

describe('state dicts of shared modules and tied parameters (as torch)', () => {
  // the second name was left out: torch's strict load of the file failed, and ddp's of torch's file
  it('a module registered twice has its tensors under both names; files with the first name only still load', () => {
    const lin = new Linear(2, 2, { generator: new Generator(1) });
    const shared = new Sequential(lin, new ReLU(), lin);
    expect([...shared.stateDict().keys()]).toEqual(['0.weight', '0.bias', '2.weight', '2.bias']);
    const older = new Map([...shared.stateDict()].filter(([k]) => k.startsWith('0.')));
    const other = new Sequential(
      ...(() => {
        const l = new Linear(2, 2, { generator: new Generator(2) });
        return [l, new ReLU(), l];
      })(),
    );
    expect(other.loadStateDict(older)).toEqual({ missingKeys: [], unexpectedKeys: [] });
    expect([...other.stateDict().get('2.weight')!.dataSync()]).toEqual([...lin.weight.data.dataSync()]);
  });

  // loading a tied model's own state dict disposed the tensor the second name still pointed at: TypeError
  it('a model with a parameter tied between two modules loads its own state dict', () => {
    class Holder extends Module {
      constructor(p: Parameter) {
        super();
        this.registerParameter('weight', p);
      }
      forward(): never {
        throw new Error('not used');
      }
    }
    class Tied extends Module {
      constructor(p: Parameter) {
        super();
        this.registerModule('a', new Holder(p));
        this.registerModule('b', new Holder(p));
      }
      forward(): never {
        throw new Error('not used');
      }
    }
    const tied = new Tied(
      new Parameter(
        tf.tensor([
          [1, 2],
          [3, 4],
        ]),
      ),
    );
    expect([...tied.stateDict().keys()]).toEqual(['a.weight', 'b.weight']);
    tied.loadStateDict(tied.stateDict());
    expect([...tied.stateDict().get('b.weight')!.dataSync()]).toEqual([1, 2, 3, 4]);
  });
});

// probe U: both were untyped or differed from torch
describe('state dicts kept past a step, and buffers two modules share', () => {
  it('loading a stateDict() whose tensors a step replaced: ModuleError naming them and saying to clone', () => {
    const [m, other] = [net(1), net(2)];
    const borrowed = m.stateDict();
    for (const p of m.parameters()) p.data = tf.mul(p.data, 2); // what an optimizer step does
    expect(() => other.loadStateDict(borrowed)).toThrow(ModuleError);
    expect(() => other.loadStateDict(borrowed)).toThrow(/'0\.weight', .* disposed: stateDict\(\) lends/);
    other.loadStateDict(m.stateDict()); // taken after the step: fine
  });

  it('a buffer shared by two modules is listed once, under its first name (torch de-duplicates)', () => {
    class Holder extends Module {
      constructor(b: Tensor) {
        super();
        this.registerBuffer('buf', b);
      }
      forward(x: Tensor): Tensor {
        return x;
      }
    }
    const shared = new Tensor(tf.ones([1]));
    const two = new Sequential(new Holder(shared), new Holder(shared));
    expect(two.namedBuffers().map(([n]) => n)).toEqual(['0.buf']);
    expect(two.buffers()).toHaveLength(1);
  });
});

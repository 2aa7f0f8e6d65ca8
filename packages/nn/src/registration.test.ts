import { type Tensor, tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { expect, it } from 'vitest';
import { Generator } from './generator.js';
import { Dropout, ReLU } from './layers/activation.js';
import { ModuleDict, Sequential } from './layers/container.js';
import { Linear } from './layers/linear.js';
import { Module, ModuleError } from './module.js';
import { Parameter } from './parameter.js';

/** torch's habit: layers and a parameter kept in plain fields, which torch registers itself. */
class PlainFields extends Module {
  readonly body = this.registerModule('body', new Linear(4, 4));
  readonly head = new Linear(4, 1);
  readonly drop = new Dropout(0.5);
  readonly scale = new Parameter(tensor([1]).data);
  /** a reference to a registered parameter (a tied head): no warning */
  readonly tied = this.body.weight;
  forward(x: Tensor): Tensor {
    return this.head.forward(this.drop.forward(this.body.forward(x))).mul(this.scale);
  }
}

/** The DDP_UNREGISTERED_FIELD warnings `fn` gives (they are emitted on the next tick). */
async function unregisteredFieldWarnings(fn: () => void): Promise<string[]> {
  const warnings: (Error & { code?: string })[] = [];
  const listen = (w: Error) => warnings.push(w);
  process.on('warning', listen);
  try {
    fn();
    await new Promise((r) => setImmediate(r));
  } finally {
    process.off('warning', listen);
  }
  return warnings.filter((w) => w.code === 'DDP_UNREGISTERED_FIELD').map((w) => w.message);
}

// was silent: head and scale missing from parameters() and stateDict() (never stepped nor saved), drop left training
it('a Module or Parameter in a plain field: one warning per field, once per module, naming what to call', async () => {
  const ours = await unregisteredFieldWarnings(() => {
    const net = new PlainFields();
    expect(net.parameters()).toHaveLength(2); // body's weight and bias only, as before: registration is explicit
    net.eval();
    net.stateDict();
  });
  expect(ours).toEqual([
    expect.stringMatching(
      /^PlainFields\.head holds a Linear that is not registered: .*this\.registerModule\('head', …\)/,
    ),
    expect.stringMatching(/^PlainFields\.drop holds a Dropout that is not registered/),
    expect.stringMatching(/^PlainFields\.scale holds a Parameter that is not registered: .*registerParameter\('scale'/),
  ]);
});

it('register* refuse what is not a Parameter, a Tensor or a Module (a raw tf.Tensor broke stateDict and saves)', () => {
  class Raw extends Module {
    forward(x: Tensor): Tensor {
      return x;
    }
  }
  const m = new Raw();
  const raw = tensor([1]).data;
  expect(() => m.registerBuffer('b', raw as unknown as Tensor)).toThrow(
    "registerBuffer('b'): expected a Tensor (new Tensor(t)) or null, got a tf.Tensor",
  );
  expect(() => m.registerParameter('p', raw as unknown as Parameter)).toThrow(/expected a Parameter or null/);
  expect(() => m.registerModule('c', {} as Module)).toThrow(ModuleError);
  raw.dispose();
});

it("loadStateDict takes another model's parameters (autograd Tensors); a plain array is a ModuleError", () => {
  const [a, b] = [new Linear(2, 1), new Linear(2, 1)];
  // was: an untyped tfjs error (and a TypeError for arrays)
  b.loadStateDict(Object.fromEntries(a.namedParameters()));
  expect(Array.from(b.weight.data.dataSync())).toEqual(Array.from(a.weight.data.dataSync()));
  expect(() => b.loadStateDict({ weight: [[1, 2]] as unknown as Tensor, bias: a.bias! })).toThrow(
    "loadStateDict: 'weight' is Array, not a tensor",
  );
});

/** torch's fine-tuning habit: a layer replaced by plain assignment after the model was built and used. */
class Net extends Module {
  body = this.registerModule('body', new Linear(3, 4, { generator: new Generator(1) }));
  fc = this.registerModule('fc', new Linear(4, 2, { generator: new Generator(2) }));
  forward(x: Tensor): Tensor {
    return this.fc.forward(this.body.forward(x).tanh());
  }
}
const data = (t: tf.Tensor) => Array.from(t.dataSync());

// was: forward used the new layer, parameters(), stateDict(), eval() and checkpoints the old one, silently
it('a registered field assigned after the model was traversed is taken over, as torch setattr', () => {
  const net = new Net();
  const first = net.fc;
  expect(net.parameters()).toContain(first.weight); // traversed: fields were checked before
  net.fc = new Linear(4, 2, { generator: new Generator(3) });
  expect(net.parameters()).toContain(net.fc.weight);
  expect(net.parameters()).not.toContain(first.weight);
  expect(data(net.stateDict().get('fc.weight')!)).toEqual(data(net.fc.weight.data));
  net.eval();
  expect(net.fc.training).toBe(false);
  const x = tensor([0.1, -0.2, 0.3], [1, 3]);
  const reloaded = new Net();
  reloaded.loadStateDict(net.stateDict());
  expect(data(reloaded.forward(x).data)).toEqual(data(net.forward(x).data));
  const writable = (l: Linear) => l as unknown as { weight: unknown; bias: unknown }; // readonly to TypeScript
  writable(net.body).bias = null; // torch's `m.bias = None`
  expect([...net.stateDict().keys()]).toEqual(['body.weight', 'fc.weight', 'fc.bias']);
  writable(net.fc).weight = new Parameter(tf.zeros([2, 4]));
  expect(net.parameters()).toContain(net.fc.weight);
  writable(net.fc).weight = tensor([1]);
  expect(() => net.parameters()).toThrow(
    /Linear\.weight is a registered parameter: cannot assign .* \(a Parameter or null\)/,
  );
  first.dispose();
});

it('replaceModule on a module under two names moves the field of that name; seq[i] = m is taken over', () => {
  const shared = new Linear(2, 2);
  class Twice extends Module {
    mid = this.registerModule('mid', shared);
    again = this.registerModule('again', shared);
    forward(x: Tensor): Tensor {
      return this.again.forward(this.mid.forward(x));
    }
  }
  const m = new Twice();
  const fresh = new Linear(2, 2);
  m.replaceModule('mid', fresh); // was: m.mid stayed the old module while parameters() listed the new one
  expect([m.mid, m.again]).toEqual([fresh, shared]);
  const seq = new Sequential(shared, new ReLU(), shared);
  seq.replaceModule('0', fresh); // was: items [old, ReLU, old] with '0' registered as the new one
  expect([...seq]).toEqual([fresh, seq.at(1), shared]);
  seq.parameters();
  const other = new Linear(2, 2);
  (seq as unknown as Record<string, Module>)[2] = other; // torch's seq[2] = …
  expect(seq.parameters()).toContain(other.weight);
  expect(seq.at(2)).toBe(other);
});

it('a plain field added after the first traversal is warned about too', async () => {
  const ours = await unregisteredFieldWarnings(() => {
    const net = new Net();
    net.parameters();
    Object.assign(net, { extra: new Linear(2, 2) });
    net.parameters();
    net.parameters();
  });
  expect(ours).toEqual([expect.stringMatching(/^Net\.extra holds a Linear that is not registered/)]);
});

it("requiresGrad_ freezes a module's parameters; ModuleDict registers by key as torch's nn.ModuleDict", () => {
  const net = new Net();
  expect(net.body.requiresGrad_(false)).toBe(net.body);
  expect(net.parameters().map((p) => p.requiresGrad)).toEqual([false, false, true, true]);
  const heads = new ModuleDict({ cls: new Linear(2, 3), box: new Linear(2, 4) });
  expect([...heads.keys()]).toEqual(['cls', 'box']);
  expect([...heads.stateDict().keys()]).toEqual(['cls.weight', 'cls.bias', 'box.weight', 'box.bias']);
  const fresh = new Linear(2, 3);
  heads.set('cls', fresh); // torch's heads['cls'] = …: same place, the new module
  expect(heads.get('cls')).toBe(fresh);
  expect(heads.parameters()[0]).toBe(fresh.weight);
  expect(() => heads.set('training', new Linear(1, 1))).toThrow(/'training' is an attribute of the dict/);
  expect(() => heads.get('mask')).toThrow(ModuleError);
});

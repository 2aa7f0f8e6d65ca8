import { type Tensor, tensor } from '@ddp/autograd';
import { expect, it } from 'vitest';
import { Dropout } from './layers/activation.js';
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

// was silent: head and scale missing from parameters() and stateDict() (never stepped nor saved), drop left training
it('a Module or Parameter in a plain field: one warning per field, once per module, naming what to call', async () => {
  const warnings: (Error & { code?: string })[] = [];
  const listen = (w: Error) => warnings.push(w);
  process.on('warning', listen);
  try {
    const net = new PlainFields();
    expect(net.parameters()).toHaveLength(2); // body's weight and bias only, as before: registration is explicit
    net.eval();
    net.stateDict();
    await new Promise((r) => setImmediate(r));
  } finally {
    process.off('warning', listen);
  }
  const ours = warnings.filter((w) => w.code === 'DDP_UNREGISTERED_FIELD').map((w) => w.message);
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

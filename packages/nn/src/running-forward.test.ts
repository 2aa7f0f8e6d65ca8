import { Tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { expect, it } from 'vitest';
import { Dropout } from './layers/activation.js';
import { Sequential } from './layers/container.js';
import { Linear } from './layers/linear.js';
import { Module } from './module.js';
import { whileForwarding } from './running-forward.js';

/** A module whose forward awaits (as a collective's would) between its two layers. */
class Awaiting extends Module {
  readonly body = this.registerModule('body', new Sequential(new Linear(2, 2), new Dropout(0.5)));
  forward(x: Tensor): Promise<Tensor> {
    return whileForwarding(this, 'Awaiting', async () => {
      await new Promise((r) => setTimeout(r, 1));
      return this.body.forward(x);
    });
  }
}

class Outer extends Module {
  readonly inner = this.registerModule('inner', new Awaiting());
  forward(x: Tensor): Promise<Tensor> {
    return this.inner.forward(x);
  }
}

// probe X: eval() before an async forward was awaited ran the rest of it in eval mode, silently
it('train/eval and loadStateDict during an async forward not awaited: refused, on the module and its parts', async () => {
  const outer = new Outer();
  const inner = outer.inner;
  const pending = outer.forward(new Tensor(tf.ones([1, 2])));
  expect(() => outer.eval()).toThrow(/Outer\.eval\(\) while Awaiting's forward still runs \(not awaited\)/);
  expect(() => inner.body.children()[1].eval()).toThrow(/Dropout\.eval\(\)/);
  expect(() => inner.loadStateDict(inner.stateDict())).toThrow(/Awaiting\.loadStateDict while/);
  expect(outer.modules().every((m) => m.training)).toBe(true); // refused before changing any
  (await pending).dispose();
  outer.eval(); // awaited: allowed
  expect(outer.modules().every((m) => !m.training)).toBe(true);
  inner.loadStateDict(inner.stateDict());
});

it('the forward itself may change its modules (a teacher put in eval mode inside it), as in torch', async () => {
  class Distilling extends Awaiting {
    override forward(x: Tensor): Promise<Tensor> {
      return whileForwarding(this, 'Distilling', async () => {
        await new Promise((r) => setTimeout(r, 1));
        this.body.eval();
        return this.body.forward(x);
      });
    }
  }
  const model = new Distilling();
  (await model.forward(new Tensor(tf.ones([1, 2])))).dispose();
  expect(model.body.training).toBe(false);
});

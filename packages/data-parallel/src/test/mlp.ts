// Test-only: the model factories the replica threads build.
import { isMainThread } from 'node:worker_threads';
import { concat } from '@ddp/autograd';
import { BatchNorm1d, Dropout, Generator, Linear, Sequential, Tanh } from '@ddp/nn';
import { tf } from '@ddp/tensor';

/** The same weights on every thread. */
export function createModule(): Sequential {
  const generator = new Generator(11);
  return new Sequential(new Linear(6, 16, { generator }), new Tanh(), new Linear(16, 3, { generator }));
}

/** A narrower model on the replica threads than on the main one: DataParallel must refuse to mix them. */
export function widerOnMain(): Sequential {
  const hidden = isMainThread ? 16 : 8;
  return new Sequential(new Linear(6, hidden), new Tanh(), new Linear(hidden, 3));
}

/** A model whose forward throws on the replica threads. */
export function throwsInForward(): Sequential {
  const m = createModule();
  if (!isMainThread) {
    m.forward = () => {
      throw new RangeError('bad input on purpose');
    };
  }
  return m;
}

/** Batch norm (running statistics, a counter) and dropout: what train / eval changes. */
export function withBatchNorm(): Sequential {
  const generator = new Generator(12);
  return new Sequential(
    new Linear(6, 8, { generator }),
    new BatchNorm1d(8),
    new Dropout(0.5),
    new Linear(8, 3, { generator }),
  );
}

/** A Linear then dropout: which mask each replica draws. */
export function withDropout(): Sequential {
  return new Sequential(new Linear(6, 4, { generator: new Generator(13) }), new Dropout(0.5));
}

/** A model whose output is a scalar (a loss): nothing to gather along a batch. */
export function scalarOutput(): Sequential {
  const m = createModule();
  const forward = m.forward.bind(m);
  m.forward = (x) => forward(x).sum();
  return m;
}

/** Other rows than its input's: each chunk's outputs summed into one row (a replica's own loss row), then doubled. */
export function rowsOfItsOwn(): Sequential {
  const m = createModule();
  const forward = m.forward.bind(m);
  m.forward = (x) => {
    const row = forward(x).sum(0, true);
    return concat([row, row.mul(2)], 0);
  };
  return m;
}

/** withBatchNorm whose output is, on the replica threads, that thread's live tensor count (its forward's memory). */
export function reportsTensors(): Sequential {
  const m = withBatchNorm();
  if (!isMainThread) {
    const forward = m.forward.bind(m);
    m.forward = (x) => forward(x).mul(0).add(tf.memory().numTensors);
  }
  return m;
}

import type { CommArray, Dtype, HalfDtype, ReduceOp } from '../dtypes.js';
import type { ProcessGroup } from '../index.js';
import type { Checker } from './checker.js';
import { generate, makeArray, reference } from './reference.js';

/**
 * One collective with its local reference: `issue` starts it and returns the Work's promise
 * plus a check to run once it is done. Data comes from generate(dtype, global rank, n, salt).
 */
export interface Scenario {
  name: string;
  done: Promise<unknown>;
  check: (c: Checker) => void;
}

export const SCENARIOS = [
  'allReduce',
  'reduceScatter',
  'broadcast',
  'allGatherInto',
  'allGather',
  'reduce',
  'gather',
  'scatter',
  'allToAll',
  'p2p',
  'barrier',
] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export interface ScenarioArgs {
  d: Dtype;
  n: number;
  salt: number;
  op?: ReduceOp;
  /** Root as a group rank. */
  root?: number;
}

const half = (d: Dtype) => (d === 'float16' || d === 'bfloat16' ? { dtype: d as HalfDtype } : {});

export function issue(g: ProcessGroup, what: ScenarioName, a: ScenarioArgs): Scenario {
  const { d, n, salt } = a;
  const op = a.op ?? 'sum';
  const root = a.root ?? 0;
  const me = g.rank;
  const G = g.ranks as number[];
  const gl = (r: number) => G[r];
  const name = `${what} ${d}×${n} ${op} root ${root} salt ${salt} group [${G.join(',')}]`;
  const each = (f: (r: number) => void) => {
    for (let r = 0; r < G.length; r++) f(r);
  };
  switch (what) {
    case 'allReduce': {
      const buf = generate(d, gl(me), n, salt);
      return {
        name,
        done: g.allReduce(buf, { op, ...half(d) }).wait(),
        check: (c) => c.equal(name, d, buf, reference(d, op, G, n, salt)),
      };
    }
    case 'reduceScatter': {
      const out = makeArray(d, n);
      const done = g.reduceScatter(out, generate(d, gl(me), n * g.size, salt), { op, ...half(d) }).wait();
      return {
        name,
        done,
        check: (c) => c.equal(name, d, out, reference(d, op, G, n * g.size, salt).subarray(me * n, (me + 1) * n)),
      };
    }
    case 'broadcast': {
      const buf = me === root ? generate(d, gl(root), n, salt) : makeArray(d, n);
      return {
        name,
        done: g.broadcast(buf, { src: root, ...half(d) }).wait(),
        check: (c) => c.equal(name, d, buf, generate(d, gl(root), n, salt)),
      };
    }
    case 'allGatherInto': {
      const out = makeArray(d, n * g.size);
      const done = g.allGatherInto(out, generate(d, gl(me), n, salt), half(d)).wait();
      return {
        name,
        done,
        check: (c) =>
          each((r) => c.equal(`${name} slot ${r}`, d, out.subarray(r * n, (r + 1) * n), generate(d, gl(r), n, salt))),
      };
    }
    case 'allGather': {
      const p = g.allGather(generate(d, gl(me), n + me, salt), half(d)).wait();
      let got: CommArray[] = [];
      const done = p.then((x) => {
        got = x;
      });
      return {
        name,
        done,
        check: (c) =>
          each((r) => c.equal(`${name} from ${r}`, d, got[r] ?? makeArray(d, 0), generate(d, gl(r), n + r, salt))),
      };
    }
    case 'reduce': {
      const buf = generate(d, gl(me), n, salt);
      const done = g.reduce(buf, { dst: root, op, ...half(d) }).wait();
      return {
        name,
        done,
        check: (c) => c.equal(name, d, buf, me === root ? reference(d, op, G, n, salt) : generate(d, gl(me), n, salt)),
      };
    }
    case 'gather': {
      let got: CommArray[] | null = null;
      const done = g
        .gather(generate(d, gl(me), n + 2 * me, salt), { dst: root, ...half(d) })
        .wait()
        .then((x) => {
          got = x;
        });
      return {
        name,
        done,
        check: (c) => {
          if (me !== root) return c.ok(`${name}: null off the root`, got === null);
          each((r) =>
            c.equal(
              `${name} from ${r}`,
              d,
              (got as CommArray[] | null)?.[r] ?? makeArray(d, 0),
              generate(d, gl(r), n + 2 * r, salt),
            ),
          );
        },
      };
    }
    case 'scatter': {
      const out = makeArray(d, n);
      const inputs = me === root ? G.map((r) => generate(d, 100 + r, n, salt)) : undefined;
      return {
        name,
        done: g.scatter(out, { src: root, inputs, ...half(d) }).wait(),
        check: (c) => c.equal(name, d, out, generate(d, 100 + gl(me), n, salt)),
      };
    }
    case 'allToAll': {
      // rank i sends n + i + j elements to rank j, made from (i, j)
      const inputs = G.map((_, j) => generate(d, gl(me) * 10 + gl(j), n + me + j, salt));
      const outputs = G.map((_, j) => makeArray(d, n + j + me));
      const done = g.allToAll(outputs, inputs, half(d)).wait();
      return {
        name,
        done,
        check: (c) =>
          each((j) =>
            c.equal(
              `${name} from ${j}`,
              d,
              outputs[j] as CommArray,
              generate(d, gl(j) * 10 + gl(me), n + j + me, salt),
            ),
          ),
      };
    }
    case 'p2p': {
      if (g.size === 1) return { name, done: Promise.resolve(), check: () => {} };
      const right = (me + 1) % g.size;
      const left = (me + g.size - 1) % g.size;
      const got = makeArray(d, n);
      const done = g
        .batchIsendIrecv([
          { op: 'isend', buf: generate(d, gl(me), n, salt), peer: right, tag: salt % 7, ...half(d) },
          { op: 'irecv', buf: got, peer: left, tag: salt % 7, ...half(d) },
        ])
        .wait();
      return { name, done, check: (c) => c.equal(name, d, got, generate(d, gl(left), n, salt)) };
    }
    case 'barrier':
      return { name, done: g.barrier().wait(), check: () => {} };
  }
}

// Test-only: an in-memory world of N ranks inside one process, implementing the
// ProcessGroup collectives the differentiable Functions use. Not exported by the package.
import type { CommArray, ProcessGroup, ReduceOp, Work } from '@ddp/comm';

const work = <T>(promise: Promise<T>): Work<T> => ({
  promise,
  wait: () => promise,
  // biome-ignore lint/suspicious/noThenProperty: a Work is thenable (comm's makeWork)
  then: (f, r) => promise.then(f, r),
});

class Rendezvous {
  private rounds = new Map<
    number,
    { values: CommArray[]; arrived: number; done: (v: CommArray[]) => void; all: Promise<CommArray[]> }
  >();
  constructor(readonly size: number) {}

  /** Resolves with every rank's contribution to call number `seq` once all have arrived. */
  exchange(seq: number, rank: number, value: CommArray): Promise<CommArray[]> {
    let round = this.rounds.get(seq);
    if (!round) {
      let done!: (v: CommArray[]) => void;
      const all = new Promise<CommArray[]>((r) => (done = r));
      round = { values: Array(this.size), arrived: 0, done, all };
      this.rounds.set(seq, round);
    }
    round.values[rank] = value.slice();
    if (++round.arrived === this.size) {
      this.rounds.delete(seq);
      // resolve on a later tick so ranks really wait for each other
      setTimeout(() => round.done(round.values), 0);
    }
    return round.all;
  }
}

function reduce(values: CommArray[], op: ReduceOp = 'sum'): Float64Array {
  const out = new Float64Array(values[0].length);
  for (let i = 0; i < out.length; i++) {
    let acc = op === 'product' ? 1 : op === 'max' ? -Infinity : op === 'min' ? Infinity : 0;
    for (const v of values) {
      const x = v[i];
      acc = op === 'max' ? Math.max(acc, x) : op === 'min' ? Math.min(acc, x) : op === 'product' ? acc * x : acc + x;
    }
    out[i] = op === 'avg' ? acc / values.length : acc;
  }
  return out;
}

const unsupported = (name: string) => (): never => {
  throw new Error(`FakeProcessGroup: ${name} is not implemented`);
};

export class FakeProcessGroup implements ProcessGroup {
  private seq = 0;
  readonly size: number;
  readonly ranks: readonly number[];
  constructor(
    private readonly world: Rendezvous,
    readonly rank: number,
  ) {
    this.size = world.size;
    this.ranks = [...Array(world.size).keys()];
  }

  private exchange(value: CommArray): Promise<CommArray[]> {
    return this.world.exchange(this.seq++, this.rank, value);
  }

  allReduce(buf: CommArray, opts: { op?: ReduceOp } = {}): Work {
    return work(this.exchange(buf).then((all) => buf.set(reduce(all, opts.op))));
  }
  broadcast(buf: CommArray, opts: { src: number }): Work {
    return work(this.exchange(buf).then((all) => buf.set(all[opts.src])));
  }
  reduce(buf: CommArray, opts: { dst: number; op?: ReduceOp }): Work {
    return work(this.exchange(buf).then((all) => void (this.rank === opts.dst && buf.set(reduce(all, opts.op)))));
  }
  allGather(input: CommArray): Work<CommArray[]> {
    return work(this.exchange(input));
  }
  allGatherInto(output: CommArray, input: CommArray): Work {
    return work(
      this.exchange(input).then((all) => {
        for (const [r, v] of all.entries()) output.set(v, r * input.length);
      }),
    );
  }
  reduceScatter(output: CommArray, input: CommArray, opts: { op?: ReduceOp } = {}): Work {
    return work(
      this.exchange(input).then((all) =>
        output.set(reduce(all, opts.op).subarray(this.rank * output.length, (this.rank + 1) * output.length)),
      ),
    );
  }
  barrier(): Work {
    return work(this.exchange(new Float32Array(0)).then(() => undefined));
  }
  gather = unsupported('gather') as ProcessGroup['gather'];
  scatter = unsupported('scatter') as ProcessGroup['scatter'];
  allToAll = unsupported('allToAll') as ProcessGroup['allToAll'];
  send = unsupported('send') as ProcessGroup['send'];
  recv = unsupported('recv') as ProcessGroup['recv'];
  batchIsendIrecv = unsupported('batchIsendIrecv') as ProcessGroup['batchIsendIrecv'];
}

/** N groups, one per simulated rank, sharing one rendezvous. */
export function fakeWorld(size: number): FakeProcessGroup[] {
  const world = new Rendezvous(size);
  return [...Array(size).keys()].map((r) => new FakeProcessGroup(world, r));
}

import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import { type Joinable, type JoinHook, type JoinHookOptions, notifyJoinContext } from '../index.js';

/** The Counter of PyTorch's Join tutorial: counts the inputs all ranks processed. */
export class Counter implements Joinable {
  count = 0;
  maxCount = 0;
  /** What notifyJoinContext reported each iteration: the ranks still active. */
  readonly active: (number | null)[] = [];

  constructor(readonly joinProcessGroup: ProcessGroup) {}

  /** One iteration: every active rank adds its 1 to the count. */
  async step(): Promise<void> {
    // awaited first: with throwOnEarlyTermination it throws here, before this iteration's all-reduce
    this.active.push(await notifyJoinContext(this));
    const one = Float32Array.of(1);
    await this.joinProcessGroup.allReduce(one).wait();
    this.count += one[0];
  }

  joinHook(opts: JoinHookOptions): JoinHook {
    const syncMaxCount = opts.syncMaxCount === true;
    const group = this.joinProcessGroup;
    return {
      // shadow step()'s all-reduce with a zero
      mainHook: async () => {
        await group.allReduce(Float32Array.of(0)).wait();
      },
      postHook: async (isLastJoiner) => {
        if (!syncMaxCount) return;
        const common = Int32Array.of(isLastJoiner ? group.rank : -1);
        await group.allReduce(common, { op: ReduceOp.MAX }).wait();
        const max = Float32Array.of(this.count);
        await group.broadcast(max, { src: common[0] }).wait();
        this.maxCount = max[0];
      },
    };
  }
}

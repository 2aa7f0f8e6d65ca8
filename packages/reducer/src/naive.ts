import type { RemovableHandle } from '@ddp/autograd';
import { groupOrWorld, type ProcessGroup, ReduceOp, sharedArray } from '@ddp/comm';
import type { Module, Parameter } from '@ddp/nn';
import { checkOptionNames, copyTensorInto, tensorFromFloat32, writeInPlace } from '@ddp/tensor';
import { DDPUsageError } from './errors.js';
import { claimParameters, releaseParameters } from './ownership.js';
import { checkModule, checkTrainableUnchanged, syncInitialState } from './sync.js';

/**
 * picotron's DataParallelNaive: each parameter's gradient is all-reduced on its own, from
 * its post-accumulate hook, as soon as it is ready. Correct and simple; one collective per
 * parameter makes it latency-bound (compare DistributedDataParallel's buckets).
 */
export class DataParallelNaive<M extends Module = Module> {
  private requireSync = true;
  private readonly hooked: ReadonlySet<Parameter>;
  private readonly params: { name: string; param: Parameter }[];
  private readonly hooks: RemovableHandle[];

  private constructor(
    readonly module: M,
    readonly processGroup: ProcessGroup,
  ) {
    const trainable = module.namedParameters().filter(([, q]) => q.requiresGrad);
    this.params = trainable.map(([name, param]) => ({ name, param }));
    this.hooked = new Set(this.params.map(({ param }) => param));
    claimParameters(this, this.params, `DataParallelNaive.create (rank ${processGroup.rank})`);
    this.hooks = [...this.hooked].map((p) => {
      const staging = sharedArray(Float32Array, p.size);
      return p.registerPostAccumulateGradHook(async (param) => {
        if (!this.requireSync) return;
        copyTensorInto(param.grad!, staging);
        await this.processGroup.allReduce(staging, { op: ReduceOp.AVG }).wait();
        if (!writeInPlace(param.grad!, staging).written) param.grad = tensorFromFloat32(staging, param.shape);
      });
    });
  }

  /** Removes the gradient hooks and gives the parameters back, so the module can be wrapped again. */
  dispose(): void {
    for (const hook of this.hooks) hook.remove();
    releaseParameters(this, this.params);
  }

  /** Checks shapes across ranks and broadcasts rank 0's parameters and buffers. */
  static async create<M extends Module>(
    module: M,
    opts: { processGroup?: ProcessGroup | null } = {},
  ): Promise<DataParallelNaive<M>> {
    // `{ process_group: tpGroup }` was ignored: the gradients averaged over the whole world
    checkModule(module, 'DataParallelNaive.create');
    checkOptionNames('DataParallelNaive.create', opts, ['processGroup'], (m) => new DDPUsageError(m));
    const group = groupOrWorld(opts.processGroup, 'DataParallelNaive.create');
    await syncInitialState(module, group, 'DataParallelNaive');
    return new DataParallelNaive(module, group);
  }

  forward(...args: Parameters<M['forward']>): ReturnType<M['forward']> {
    checkTrainableUnchanged(this.module, this.hooked, 'DataParallelNaive', this.processGroup.rank);
    return (this.module.forward as (...a: unknown[]) => unknown)(...args) as ReturnType<M['forward']>;
  }

  /** Runs fn without gradient synchronization. */
  async noSync<T>(fn: () => Promise<T> | T): Promise<T> {
    this.requireSync = false;
    try {
      return await fn();
    } finally {
      this.requireSync = true;
    }
  }
}

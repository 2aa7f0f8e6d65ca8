import { pathToFileURL } from 'node:url';
import { AutogradFunction, autocastDtype, type Context, chunkSizes, isGradEnabled, Tensor } from '@ddp/autograd';
import { defaultGenerator, type TensorModule } from '@ddp/nn';
import { checkOptionNames, getNumThreads, tf } from '@ddp/tensor';
import { DataParallelError } from './errors.js';
import type { BufferValues, ToReplica } from './protocol.js';
import { Replica, startReplica } from './replica.js';

export interface DataParallelOptions {
  /** Replica threads (default 2). */
  replicas?: number;
  /** The factory's export name in the module file (default 'createModule'). */
  exportName?: string;
}

/**
 * Batch sizes of the chunks scatter makes: torch's `x.chunk(replicas)` (@ddp/autograd's
 * chunkSizes), ⌈batch / replicas⌉ rows each, fewer chunks than replicas when they run out.
 * Batch norm in training normalises each chunk by its own statistics, so other chunks would
 * give other outputs than torch's DataParallel.
 */
export { chunkSizes };

/**
 * Gathers the replicas' outputs along the batch; in backward scatters the output gradient
 * back to them and returns the sum of their parameter gradients as the main replica's.
 */
class Gather extends AutogradFunction {
  override readonly asyncBackward = true;
  private dp!: DataParallel;
  private sizes: number[] = [];
  /** Rows of each replica's output, backward's split (a replica may return other rows than its chunk's). */
  private outRows: number[] = [];
  /** The input chunks' shapes, for their gradients. */
  private inShapes: number[][] = [];
  private id = 0;
  /** Whether the replicas keep this forward's graph. */
  private recorded = false;

  async forward(ctx: Context, x: tf.Tensor, dp: DataParallel, ...params: tf.Tensor[]): Promise<tf.Tensor> {
    this.dp = dp;
    this.id = dp.nextForwardId++;
    const version = dp.writeParameters(params);
    const record = isGradEnabled();
    this.recorded = record;
    const inputGrad = record && ctx.needsInputGrad[0];
    const cast = autocastDtype();
    this.sizes = chunkSizes(x.shape[0], dp.replicas.length);
    const chunks = tf.split(x, this.sizes, 0);
    this.inShapes = chunks.map((c) => c.shape);
    const training = dp.module.modules().map((m) => m.training);
    const buffers = dp.module
      .buffers()
      .map((b) => ({ data: b.data.dataSync() as Float32Array | Int32Array, shape: b.shape }));
    const outputs = await Promise.all(
      chunks.map((c, r) => {
        const m: ToReplica = {
          type: 'forward',
          id: this.id,
          version,
          record,
          input: c.dataSync() as Float32Array,
          shape: c.shape,
          training,
          buffers,
          inputGrad,
          autocast: cast,
          // each replica's dropout masks its own, drawn from the main stream (a seed reaches them, a resume too)
          seed: defaultGenerator.nextUint32(),
        };
        c.dispose();
        return dp.replicas[r].request(m, 'forward');
      }),
    );
    if (outputs[0].type === 'output') dp.readBuffers(outputs[0].buffers);
    if (outputs.some((o) => o.type === 'output' && o.shape.length === 0))
      throw new DataParallelError(
        'DataParallel: the module returned a scalar, which has no batch dimension to gather along; return ' +
          'per-sample values and reduce them after the forward',
      );
    const parts = outputs.map((o) => (o.type === 'output' ? tf.tensor(o.data, o.shape) : tf.zeros([0])));
    this.outRows = parts.map((p) => p.shape[0]);
    const y = tf.concat(parts, 0);
    tf.dispose(parts);
    return y;
  }

  /** Unbackwarded (its output disposed): the replicas drop this forward's graph now, not at the next step. */
  override onRelease(): void {
    if (this.recorded) for (const r of this.dp.replicas) r.notify({ type: 'release', id: this.id });
  }

  async backward(ctx: Context, dy: tf.Tensor): Promise<(tf.Tensor | null)[]> {
    const { dp, sizes } = this;
    // torch's Gather.backward: each replica's output rows, not its input chunk's (a per-replica loss row)
    const chunks = tf.split(dy, this.outRows, 0);
    const answers = await Promise.all(
      chunks.map((c, r) => {
        const m: ToReplica = { type: 'backward', id: this.id, grad: c.dataSync() as Float32Array, shape: c.shape };
        c.dispose();
        return dp.replicas[r].request(m, 'backward');
      }),
    );
    // the input's gradient, gathered back (torch's Scatter.backward): a module before DataParallel got none
    const gradOf = (r: number) => {
      const a = answers[r];
      return a.type === 'grads' && a.inputGrad ? tf.tensor(a.inputGrad, this.inShapes[r]) : tf.zeros(this.inShapes[r]);
    };
    const inputGrad = ctx.needsInputGrad[0]
      ? tf.tidy(() =>
          tf.concat(
            sizes.map((_, r) => gradOf(r)),
            0,
          ),
        )
      : null;
    return [inputGrad, null, ...dp.reduceGradients(sizes.length)];
  }
}

/**
 * torch.nn.DataParallel's single-process design on Node: `replicas` worker threads, each with
 * its own tfjs backend and its own copy of the model (built by the same factory). Every
 * forward writes the main replica's parameters where all replicas read them (the broadcast),
 * splits the input along the batch (scatter), runs the chunks in parallel and concatenates
 * the outputs on the main thread (gather); backward sends each replica its slice of the output
 * gradient and sums their parameter gradients into the main replica's (`module`), which the
 * optimizer steps. Only the batch's first input is scattered; the output must be one tensor.
 */
export class DataParallel {
  private readonly paramView: Float32Array;

  private constructor(
    readonly module: TensorModule,
    readonly replicas: Replica[],
    private readonly offsets: number[],
    private readonly numel: number,
    paramView: Float32Array,
  ) {
    this.paramView = paramView;
  }

  /** Builds the main replica and `replicas` replica threads from `factoryUrl`'s factory. */
  static async create(factoryUrl: string | URL, opts: DataParallelOptions = {}): Promise<DataParallel> {
    checkOptionNames('DataParallel.create', opts, ['replicas', 'exportName'], (m) => new DataParallelError(m));
    const count = opts.replicas ?? 2;
    if (!(Number.isInteger(count) && count > 0))
      throw new DataParallelError(`DataParallel: replicas must be a positive integer, got ${count}`);
    const exportName = opts.exportName ?? 'createModule';
    const href = factoryUrl instanceof URL ? factoryUrl.href : pathToFileURL(factoryUrl).href;
    const factory = (await import(href))[exportName] as (() => TensorModule) | undefined;
    if (typeof factory !== 'function')
      throw new DataParallelError(`DataParallel: ${href} exports no function '${exportName}'`);
    const module = factory();
    const params = module.parameters();
    const offsets = params.map((_, i) => params.slice(0, i).reduce((s, p) => s + p.size, 0));
    const numel = params.reduce((s, p) => s + p.size, 0);
    const shared = (n: number) => new Float32Array(new SharedArrayBuffer(4 * n));
    const paramView = shared(numel);
    const threads = Math.max(1, Math.floor(getNumThreads() / count));
    const replicas = Array.from({ length: count }, (_, r) => {
      const grads = shared(numel);
      return new Replica(
        r,
        startReplica({ factoryUrl: href, exportName, replica: r, threads, params: paramView, grads }),
        grads,
      );
    });
    const dp = new DataParallel(module, replicas, offsets, numel, paramView);
    try {
      for (const r of replicas) {
        const ready = await r.ready;
        if (ready.type !== 'ready' || ready.numel !== numel) {
          throw new DataParallelError(
            `DataParallel replica ${r.index}: its model has ${ready.type === 'ready' ? ready.numel : '?'} ` +
              `parameters, the main one ${numel}`,
          );
        }
      }
    } catch (e) {
      await dp.dispose();
      throw e;
    }
    return dp;
  }

  /** The output for the whole batch `x` [N, …]; its backward fills `module`'s gradients. */
  forward(x: Tensor): Promise<Tensor> {
    // torch scatters tuples too; here a tuple or an object failed with a TypeError deep inside
    if (!(x instanceof Tensor) || x.rank === 0)
      return Promise.reject(
        new DataParallelError('DataParallel.forward takes one tensor [N, …], scattered along its first dimension'),
      );
    return Gather.applyAsync(x, this, ...this.module.parameters());
  }

  /** @internal Numbers the forwards, so each backward reaches its own graph on every replica. */
  nextForwardId = 0;
  private paramVersion = 0;

  /**
   * @internal The main replica's parameters where every replica reads them; returns their version,
   * new whenever a value changed (compared bit for bit: an in-place write keeps the tensor).
   */
  writeParameters(params: tf.Tensor[]): number {
    const bits = new Uint32Array(this.paramView.buffer);
    let changed = false;
    params.forEach((p, i) => {
      const values = p.dataSync() as Float32Array;
      const given = new Uint32Array(values.buffer, values.byteOffset, values.length);
      const at = this.offsets[i];
      for (let j = 0; j < given.length && !changed; j++) changed = given[j] !== bits[at + j];
      this.paramView.set(values, at);
    });
    if (changed || this.paramVersion === 0) this.paramVersion++;
    return this.paramVersion;
  }

  /**
   * @internal Replica 0's buffers after its forward into the main replica: torch's replica on
   * device 0 shares the module's buffers, so its running statistics are the module's.
   */
  readBuffers(buffers: BufferValues[]): void {
    this.module.buffers().forEach((b, i) => {
      b.data = tf.tensor(buffers[i].data, buffers[i].shape, b.dtype as 'float32' | 'int32');
    });
  }

  /** @internal The sum of the first `used` replicas' gradients, one tensor per parameter. */
  reduceGradients(used: number): tf.Tensor[] {
    const sum = new Float32Array(this.numel);
    for (const r of this.replicas.slice(0, used)) for (let i = 0; i < this.numel; i++) sum[i] += r.grads[i];
    return this.module
      .parameters()
      .map((p, i) => tf.tensor(sum.subarray(this.offsets[i], this.offsets[i] + p.size), p.shape));
  }

  /** Ends the replica threads. */
  async dispose(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.worker.terminate()));
  }
}

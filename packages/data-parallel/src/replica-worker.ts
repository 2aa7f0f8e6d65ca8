// One replica of DataParallel, on its own worker thread with its own tfjs backend: builds the
// model from the factory, and per step copies the main replica's parameters in, runs its chunk
// forward, and on backward writes its parameter gradients into its shared buffer.
import { parentPort, workerData } from 'node:worker_threads';
import type { Tensor } from '@ddp/autograd';
import type { TensorModule } from '@ddp/nn';
import { setNumThreads, tf } from '@ddp/tensor';
import type { BufferValues, FromReplica, ReplicaInit, ToReplica } from './protocol.js';

const init = workerData as ReplicaInit;
const port = parentPort!;
const reply = (m: FromReplica) => port.postMessage(m);
setNumThreads(init.threads);
const { autocast, fromTf, manualSeed, noGrad, Tensor: AutogradTensor, tidy } = await import('@ddp/autograd');
const nn = await import('@ddp/nn');
const factory = (await import(init.factoryUrl))[init.exportName] as () => TensorModule;
const module = factory();
const params = module.parameters();
const offsets = params.map((_, i) => params.slice(0, i).reduce((s, p) => s + p.size, 0));
/** The graphs of forwards whose backward has not come yet (output and input), by forward id. */
const outputs = new Map<number, { output: Tensor; input: Tensor }>();
/** Forwards whose graphs were dropped when the parameters changed before their backward. */
const released = new Set<number>();
let loadedVersion = -1;

/** The main replica's current values into this replica's parameters (the per-step broadcast). */
function loadParameters(): void {
  params.forEach((p, i) => {
    p.data = tf.tensor(init.params.subarray(offsets[i], offsets[i] + p.size), p.shape);
  });
}

/** The main replica's training flags and buffers into this replica (before each forward). */
function loadState(training: boolean[], buffers: BufferValues[]): void {
  module.modules().forEach((mod, i) => {
    mod.training = training[i];
  });
  module.buffers().forEach((b, i) => {
    b.data = tf.tensor(buffers[i].data, buffers[i].shape, b.dtype as 'float32' | 'int32');
  });
}

async function handle(m: Exclude<ToReplica, { type: 'release' }>): Promise<FromReplica> {
  if (m.type === 'forward') {
    if (m.version !== loadedVersion) {
      // new parameter values replace the ones pending graphs hold: those graphs cannot be backpropagated
      for (const [id, o] of outputs) {
        o.output.dispose();
        o.input.dispose();
        released.add(id);
      }
      outputs.clear();
      loadParameters();
      loadedVersion = m.version;
    }
    loadState(m.training, m.buffers);
    nn.manualSeed(m.seed);
    manualSeed(m.seed);
    const x = fromTf(tf.tensor(m.input, m.shape), { requiresGrad: m.inputGrad });
    // in a tidy: the forward's intermediates (all of them under noGrad) leaked every call (probe BA)
    const run = () => tidy(() => module.forward(x));
    const cast = () => (m.autocast ? autocast({ dtype: m.autocast }, run) : run());
    let output: unknown;
    try {
      output = m.record ? cast() : noGrad(cast);
    } catch (error) {
      x.dispose();
      throw error;
    }
    if (!(output instanceof AutogradTensor)) {
      x.dispose();
      throw new TypeError('the module must return one tensor (DataParallel gathers one output along the batch)');
    }
    const buffers = module
      .buffers()
      .map((b) => ({ data: b.data.dataSync() as Float32Array | Int32Array, shape: b.shape }));
    const reply = { type: 'output' as const, data: output.data.dataSync() as Float32Array, shape: output.shape };
    if (m.record) outputs.set(m.id, { output, input: x });
    else tf.dispose([output.data, x.data]);
    return { ...reply, buffers };
  }
  const pending = outputs.get(m.id);
  if (pending === undefined) {
    throw new Error(
      released.has(m.id)
        ? `backward of forward ${m.id}: the parameters changed after that forward (an optimizer step before its ` +
            'backward), so its graph was released'
        : `backward of forward ${m.id} before its forward`,
    );
  }
  outputs.delete(m.id);
  const { output, input } = pending;
  const grad = tf.tensor(m.grad, m.shape);
  await output.backward(grad);
  grad.dispose();
  params.forEach((p, i) => {
    init.grads.set(p.grad === null ? new Float32Array(p.size) : (p.grad.dataSync() as Float32Array), offsets[i]);
    p.grad = null;
  });
  const inputGrad = input.requiresGrad ? ((input.grad?.dataSync() as Float32Array | undefined) ?? null) : null;
  output.dispose();
  input.dispose();
  return { type: 'grads', inputGrad };
}

port.on('message', (m: ToReplica) => {
  if (m.type === 'release') {
    // an evaluation forward with grad whose output was disposed: its graph held until the next step (probe BA)
    const pending = outputs.get(m.id);
    outputs.delete(m.id);
    pending?.output.dispose();
    pending?.input.dispose();
    return;
  }
  handle(m).then(reply, (e: Error) => reply({ type: 'error', name: e.name, message: e.message }));
});
reply({ type: 'ready', numel: params.reduce((s, p) => s + p.size, 0) });

import { tf } from '@ddp/tensor';
import { type BackwardRun, runBackward } from './backward-run.js';
import { AutogradArgumentError, AutogradError, checkOptions, GraphFreedError } from './errors.js';
import type { FunctionNode, GradResult } from './function.js';
import { AccumulateGrad, type Edge, type Node } from './node.js';
import { sumToShape } from './ops/broadcast.js';
import type { Tensor } from './tensor.js';
import { hookedGradOutputs, runTensorHooks, tensorMark } from './tensor-hooks.js';

export interface BackwardOptions {
  /** Keep saved tensors and intermediate outputs so the graph can be backwarded again. */
  retainGraph?: boolean;
}

/**
 * Counts, for every node reachable from root, how many edges point at it; a backward that frees the
 * graph claims its nodes before its first await, so one started meanwhile is refused.
 */
function countDependencies(root: Node, claim: boolean): Map<Node, number> {
  const deps = new Map<Node, number>([[root, 0]]);
  const stack = [root];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (node.freed || node.claimed) throw new GraphFreedError(node.name);
    for (const edge of node.next) {
      if (edge === null) continue;
      const seen = deps.has(edge.node);
      deps.set(edge.node, (deps.get(edge.node) ?? 0) + 1);
      if (!seen) stack.push(edge.node);
    }
  }
  if (claim) for (const node of deps.keys()) if (!(node instanceof AccumulateGrad)) node.claimed = true;
  return deps;
}

function accumulate(node: AccumulateGrad, incoming: tf.Tensor, run: BackwardRun): void {
  const leaf = node.variable;
  // requiresGrad turned off after the forward: no gradient and no hooks (torch's AccumulateGrad returns early)
  if (!leaf.requiresGrad) {
    incoming.dispose();
    return;
  }
  const grad = runTensorHooks(leaf, incoming);
  if (leaf.grad === null) leaf.grad = grad;
  else {
    leaf.grad = tf.add(leaf.grad, grad);
    grad.dispose();
  }
  for (const hook of leaf.postAccumulateGradHooks) {
    const r = hook(leaf);
    if (r instanceof Promise) run.pending.push(r);
  }
}

function normalise(result: GradResult, n: number, name: string): (tf.Tensor | null)[] {
  const list = Array.isArray(result) ? result : [result];
  if (list.length !== n) {
    throw new AutogradError(
      `${name}.backward returned ${list.length} gradients, expected ${n} (one per forward argument)`,
    );
  }
  return list.map((g) => g ?? null);
}

async function callFunction(node: FunctionNode, grads: tf.Tensor[]): Promise<(tf.Tensor | null)[]> {
  const { fn, ctx } = node;
  if (ctx.isFreed) throw new GraphFreedError(node.name);
  const result = fn.backwardIsAsync
    ? await fn.backward(ctx, ...grads)
    : tf.tidy(() => keepAll(fn.backward(ctx, ...grads)) as tf.Tensor[]);
  return normalise(result as GradResult, node.next.length, node.name);
}

function keepAll(r: GradResult | Promise<GradResult>): (tf.Tensor | null)[] {
  if (r instanceof Promise) throw new AutogradError('a backward returning a promise needs asyncBackward = true');
  return (Array.isArray(r) ? r : [r]).map((g) => g ?? null);
}

/** The shape of what `edge` leads to: a leaf's, or the output of the node that made the input. */
function inputShape(edge: Edge): readonly number[] {
  return edge.node instanceof AccumulateGrad
    ? edge.node.variable.shape
    : (edge.node as FunctionNode).outputShapes[edge.outputIndex];
}

/**
 * torch's validate_outputs on what a backward returned: a gradient of another shape than its
 * input is summed down when the input broadcasts to it and refused otherwise (a custom backward's
 * [1] for a [3] input became the leaf's .grad, or broadcast into the other paths' sum); a
 * non-float one is cast to float32; one the backward does not own (a saved tensor, which release
 * disposes, or one that existed before it ran: .grad came out disposed) is cloned.
 */
function checkInputGrads(
  node: FunctionNode,
  grads: (tf.Tensor | null)[],
  notOwned: (g: tf.Tensor) => boolean,
): (tf.Tensor | null)[] {
  // handles of their own first (the same tensor for two inputs, as add's dy), so a swap below frees only its own
  const owned = grads.map((g, i) => (g !== null && (notOwned(g) || grads.indexOf(g) < i) ? g.clone() : g));
  return owned.map((g, i) => {
    const edge = node.next[i];
    if (g === null || edge === null) return g;
    const shape = inputShape(edge);
    let out = g;
    if (!tf.util.arraysEqual(out.shape, [...shape])) {
      const broadcast = out.rank >= shape.length && broadcastsTo(shape, out.shape);
      if (!broadcast) {
        for (const other of owned) other?.dispose(); // the engine's to free: none of them will flow on
        throw new AutogradError(
          `${node.name}.backward returned an invalid gradient at index ${i}: got [${out.shape}] but expected ` +
            `shape compatible with [${shape}]`,
        );
      }
      out = swap(out, sumToShape(out, shape));
    }
    if (out.dtype !== 'float32') out = swap(out, tf.cast(out, 'float32'));
    return out;
  });
}

/** Whether `shape` broadcasts to `target` (each of its dims, from the right, 1 or equal). */
function broadcastsTo(shape: readonly number[], target: readonly number[]): boolean {
  const lead = target.length - shape.length;
  return shape.every((d, k) => d === 1 || d === target[lead + k]);
}

/** `next`, made from `prev`; prev disposed unless it is next. */
function swap(prev: tf.Tensor, next: tf.Tensor): tf.Tensor {
  if (next !== prev) prev.dispose();
  return next;
}

/** Frees what this node kept for backward and the intermediate outputs nobody retained. */
function release(node: FunctionNode, root: Tensor): void {
  node.releaseSaved();
  for (const out of node.outputs) if (out !== root && !out.retained) out.free('freed by backward()');
}

type Buffers = Map<Node, (tf.Tensor | null)[]>;
const emptyBuffer = (node: Node) => Array<tf.Tensor | null>(node.numOutputs).fill(null);

/** Adds a node's input gradients into the buffers of the nodes they flow to; queues those now complete. */
function route(
  node: FunctionNode,
  inputGrads: (tf.Tensor | null)[],
  buffers: Buffers,
  deps: Map<Node, number>,
  ready: Node[],
): void {
  // the same tensor returned for two inputs (add's dy) gets a handle per input before routing
  const distinct = inputGrads.map((g, i) => (g !== null && inputGrads.indexOf(g) < i ? g.clone() : g));
  node.next.forEach((edge, i) => {
    const g = distinct[i] ?? null;
    if (edge === null) {
      g?.dispose();
      return;
    }
    const buf = buffers.get(edge.node) ?? emptyBuffer(edge.node);
    buffers.set(edge.node, buf);
    if (g !== null) {
      const prev = buf[edge.outputIndex];
      buf[edge.outputIndex] = prev ? tf.add(prev, g) : g;
      if (prev) {
        prev.dispose();
        g.dispose();
      }
    }
    const left = deps.get(edge.node)! - 1;
    deps.set(edge.node, left);
    // a node that received no gradient at all still runs, so its own inputs are released
    if (left === 0) ready.push(edge.node);
  });
}

/** Runs the graph below root, then awaits hook promises and runs queued callbacks. */
async function execute(
  root: Tensor,
  rootGrad: tf.Tensor,
  deps: Map<Node, number>,
  opts: BackwardOptions,
  run: BackwardRun,
): Promise<void> {
  const rootNode = root.isLeaf ? root.gradAccumulator() : root.gradFn!;
  const buffers: Buffers = new Map([[rootNode, emptyBuffer(rootNode)]]);
  buffers.get(rootNode)![root.outputIndex] = rootGrad;
  const ready: Node[] = [rootNode];
  try {
    while (ready.length > 0) {
      ready.sort((a, b) => a.sequenceNr - b.sequenceNr);
      const node = ready.pop()!;
      const incoming = buffers.get(node)!;
      buffers.delete(node);
      if (node instanceof AccumulateGrad) {
        if (incoming[0]) accumulate(node, incoming[0], run);
        continue;
      }
      const fnNode = node as FunctionNode;
      const gradOutputs = hookedGradOutputs(fnNode, incoming);
      let inputGrads: (tf.Tensor | null)[] = [];
      const mark = tensorMark();
      try {
        fnNode.ctx.retainsGraph = opts.retainGraph === true;
        inputGrads = await callFunction(fnNode, gradOutputs);
      } finally {
        // a backward may pass a gradient through unchanged: that one now belongs to the input
        for (const g of gradOutputs) if (!inputGrads.includes(g)) g.dispose();
      }
      inputGrads = checkInputGrads(
        fnNode,
        inputGrads,
        (g) => fnNode.ctx.holds(g) || (g.id < mark && !gradOutputs.includes(g)),
      );
      if (!opts.retainGraph) release(fnNode, root);
      route(fnNode, inputGrads, buffers, deps, ready);
    }
    await Promise.all(run.pending);
    for (let i = 0; i < run.callbacks.length; i++) await run.callbacks[i]();
  } catch (error) {
    // the graph is spent either way (claimed): what the nodes not reached saved would leak, the loss's
    // disposal stops at the freed nodes above them
    if (!opts.retainGraph)
      for (const n of deps.keys()) if (!(n instanceof AccumulateGrad || n.freed)) release(n as FunctionNode, root);
    throw error;
  } finally {
    for (const buf of buffers.values()) for (const g of buf) g?.dispose();
  }
}

/**
 * The engine: runs every node reachable from root once all gradients flowing into it are in,
 * later-created nodes first among the ready ones (as PyTorch does), leaves as soon as ready.
 */
export async function backward(root: Tensor, gradient?: tf.Tensor | Tensor, opts: BackwardOptions = {}): Promise<void> {
  checkOptions('backward', opts, ['retainGraph'], ['retainGraph']);
  // a Tensor as the gradient (torch.autograd.backward's grad_tensors) is its data; anything else (the options
  // given first, `backward({ retainGraph: true })`) was taken for no gradient and the options lost (probe CP)
  const isTensor = typeof gradient === 'object' && gradient !== null && 'gradFn' in gradient; // no cycle import
  if (gradient !== undefined && !(gradient instanceof tf.Tensor) && !isTensor) {
    throw new AutogradArgumentError(
      'backward: the gradient must be a Tensor (or undefined for a scalar); options go second: ' +
        'backward(undefined, { retainGraph: true })',
    );
  }
  const grad = gradient === undefined || gradient instanceof tf.Tensor ? gradient : gradient.data;
  if (!root.requiresGrad) throw new AutogradArgumentError('backward() on a tensor that does not require grad');
  if (grad === undefined && root.size !== 1) {
    throw new AutogradArgumentError(`grad can be implicitly created only for scalar outputs (shape [${root.shape}])`);
  }
  if (grad !== undefined && !tf.util.arraysEqual(grad.shape, root.shape)) {
    throw new AutogradArgumentError(`backward: grad shape [${grad.shape}] does not match the tensor's [${root.shape}]`);
  }
  const deps = countDependencies(root.isLeaf ? root.gradAccumulator() : root.gradFn!, !opts.retainGraph);
  const rootGrad = grad === undefined ? tf.onesLike(root.data) : grad.clone();
  const leaves = [...deps.keys()].flatMap((n) => (n instanceof AccumulateGrad ? [n.variable] : []));
  await runBackward(leaves, (run) => execute(root, rootGrad, deps, opts, run));
}

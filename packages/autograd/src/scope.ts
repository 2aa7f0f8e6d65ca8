import type { Node } from './node.js';
import type { Tensor } from './tensor.js';

interface Scope {
  tensors: Set<Tensor>;
  nodes: Set<Node>;
}
const scopes: Scope[] = [];

/** Called by the Tensor constructor: the innermost tidy() scope owns the new tensor. */
export function trackTensor(t: Tensor): void {
  scopes[scopes.length - 1]?.tensors.add(t);
}

/** Called when a graph node is recorded, so tidy() can free graphs nobody can backward. */
export function trackNode(node: Node): void {
  scopes[scopes.length - 1]?.nodes.add(node);
}

function collectTensors(value: unknown, into: Set<Tensor>, isTensor: (v: unknown) => v is Tensor): void {
  if (isTensor(value)) into.add(value);
  else if (Array.isArray(value)) for (const v of value) collectTensors(v, into, isTensor);
  else if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    for (const v of Object.values(value)) collectTensors(v, into, isTensor);
  }
}

/**
 * Graph nodes recorded inside a scope that no returned tensor leads to can never be backwarded:
 * free their saved tensors now (an eval forward run with grad enabled would leak them).
 * Edges point at older nodes, so a walk from the returned tensors through this scope's nodes
 * finds every one of them still reachable. Returns those.
 */
function releaseUnreachableNodes(scope: Scope, kept: Set<Tensor>): Set<Node> {
  const reachable = new Set<Node>();
  const stack = [...kept].flatMap((t) => (t.gradFn && scope.nodes.has(t.gradFn) ? [t.gradFn] : []));
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (reachable.has(node)) continue;
    reachable.add(node);
    for (const edge of node.next) if (edge && scope.nodes.has(edge.node)) stack.push(edge.node);
  }
  for (const node of scope.nodes) if (!reachable.has(node)) node.releaseSaved();
  return reachable;
}

/**
 * Runs a synchronous fn and disposes every autograd Tensor created inside it except those it
 * returns (in an array or plain object too) and leaves that require grad (parameters).
 * Graph nodes keep their own saved tensors, so a forward wrapped in tidy can still backward;
 * nodes the returned tensors do not lead to are freed.
 */
export function tidy<T>(fn: () => T): T {
  const scope: Scope = { tensors: new Set(), nodes: new Set() };
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } finally {
    scopes.pop();
  }
  if (result instanceof Promise) throw new TypeError('tidy() takes a synchronous function');
  const kept = new Set<Tensor>();
  collectTensors(result, kept, (v): v is Tensor => scope.tensors.has(v as Tensor));
  const reachable = releaseUnreachableNodes(scope, kept);
  const outer = scopes[scopes.length - 1];
  for (const node of reachable) outer?.nodes.add(node);
  for (const t of scope.tensors) {
    if (kept.has(t) || (t.isLeaf && t.requiresGrad)) outer?.tensors.add(t);
    else t.dispose();
  }
  return result;
}

import type { Tensor } from './tensor.js';

const scopes: Set<Tensor>[] = [];

/** Called by the Tensor constructor: the innermost tidy() scope owns the new tensor. */
export function trackTensor(t: Tensor): void {
  scopes[scopes.length - 1]?.add(t);
}

function collectTensors(value: unknown, into: Set<Tensor>, isTensor: (v: unknown) => v is Tensor): void {
  if (isTensor(value)) into.add(value);
  else if (Array.isArray(value)) for (const v of value) collectTensors(v, into, isTensor);
  else if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    for (const v of Object.values(value)) collectTensors(v, into, isTensor);
  }
}

/**
 * Runs a synchronous fn and disposes every autograd Tensor created inside it except those it
 * returns (in an array or plain object too) and leaves that require grad (parameters).
 * Graph nodes keep their own saved tensors, so a forward wrapped in tidy can still backward;
 * the nodes only disposed tensors led to are freed with them.
 */
export function tidy<T>(fn: () => T): T {
  const scope = new Set<Tensor>();
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } catch (error) {
    scopes.pop();
    release(scope, new Set()); // as tf.tidy: a typed error caught, training going on, leaked what fn made (probe BA)
    throw error;
  }
  scopes.pop();
  if (result instanceof Promise) {
    result.catch(() => undefined); // reported as the TypeError below
    release(scope, new Set()); // what it made before its first await
    // an async module forward called where a synchronous one runs (a root's forward replaced after fullyShard;
    // probe BS)
    throw new TypeError('tidy() takes a synchronous function, and this one returned a Promise (an async forward?)');
  }
  const kept = new Set<Tensor>();
  collectTensors(result, kept, (v): v is Tensor => scope.has(v as Tensor));
  release(scope, kept);
  return result;
}

/** tidy that also says whether its result was made inside it (not a tensor from outside handed back). */
export function tidyMade<T>(fn: () => T): { result: T; made: boolean } {
  let made = false;
  const result = tidy(() => {
    const r = fn();
    made = scopes[scopes.length - 1].has(r as Tensor);
    return r;
  });
  return { result, made };
}

/** Disposes a scope's tensors but `kept` and leaves that require grad, which go to the enclosing scope. */
function release(scope: Set<Tensor>, kept: Set<Tensor>): void {
  const outer = scopes[scopes.length - 1];
  for (const t of scope) {
    if (kept.has(t) || (t.isLeaf && t.requiresGrad)) outer?.add(t);
    else t.dispose();
  }
}

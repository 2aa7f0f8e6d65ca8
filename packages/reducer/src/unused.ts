import { AccumulateGrad, type Node, Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { UnusedParametersError } from './errors.js';

/** Every Tensor in a forward's output (arrays and plain objects searched). */
function outputTensors(out: unknown, found: Tensor[] = []): Tensor[] {
  if (out instanceof Tensor) found.push(out);
  else if (Array.isArray(out)) for (const o of out) outputTensors(o, found);
  else if (out !== null && typeof out === 'object') for (const o of Object.values(out)) outputTensors(o, found);
  return found;
}

/** Indices of the parameters that no graph edge from a forward's output reaches (findUnusedParameters). */
export function unreachedParameters(out: unknown, params: readonly { param: Tensor }[]): number[] {
  const seen = new Set<Node>();
  const reached = new Set<Tensor>();
  const stack: Node[] = outputTensors(out).flatMap((t) =>
    t.gradFn ? [t.gradFn] : t.isLeaf && t.requiresGrad ? [t.gradAccumulator()] : [],
  );
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (seen.has(node)) continue;
    seen.add(node);
    if (node instanceof AccumulateGrad) reached.add(node.variable);
    for (const edge of node.next) if (edge) stack.push(edge.node);
  }
  return params.flatMap(({ param }, i) => (reached.has(param) ? [] : [i]));
}

/**
 * Runs `search` on a forward's output, or on what it resolves to when the forward is async
 * (SyncBatchNorm, tensor-parallel layers): a Promise holds no tensor, so every parameter was
 * taken for unused. Returns the output as it was.
 */
export function whenResolved<T>(out: T, search: (resolved: unknown) => void): T {
  if (!(out instanceof Promise)) {
    search(out);
    return out;
  }
  return out.then((resolved) => {
    search(resolved);
    return resolved;
  }) as T;
}

/**
 * Without findUnusedParameters, parameters without a gradient stop their bucket (and every
 * later one) from launching. Every rank that sees this all-reduces its unused set and
 * raises UnusedParametersError naming the union. A rank whose buckets all launched is
 * still waiting on one of them, which now meets this all-reduce instead: @ddp/comm
 * reports the mismatch on every rank, so nobody hangs.
 */
export async function raiseUnused(
  params: readonly { name: string }[],
  unready: number[],
  group: ProcessGroup,
  iteration: number,
): Promise<never> {
  const flags = new Int32Array(params.length);
  for (const i of unready) flags[i] = 1;
  try {
    await group.allReduce(flags).wait();
  } catch {
    // peers launched buckets this rank did not: name this rank's own unused parameters
  }
  const names = params.flatMap(({ name }, i) => (flags[i] > 0 ? [name] : []));
  throw new UnusedParametersError(names, group.ranks[group.rank], iteration);
}

import { checkBooleanOptions, checkOptionNames } from '@ddp/tensor';

/** Base class of every error @ddp/autograd raises. */
export class AutogradError extends Error {
  override name = 'AutogradError';
}

/** backward() reached a node whose saved tensors were already freed by an earlier backward. */
export class GraphFreedError extends AutogradError {
  override name = 'GraphFreedError';
  constructor(op: string) {
    super(
      `Trying to backward through the graph a second time (node ${op} was freed by an earlier backward). ` +
        'Pass { retainGraph: true } to the first backward() if you need to backward twice.',
    );
  }
}

/** A tensor's data was read after it was disposed (by dispose(), tidy() or backward()). */
export class TensorDisposedError extends AutogradError {
  override name = 'TensorDisposedError';
  constructor(what: string) {
    super(
      `Tensor data is disposed (${what}). backward() frees intermediate outputs of the graph it consumed; ` +
        'call t.retain() before backward to keep one, or detach() a copy.',
    );
  }
}

/** Arguments that cannot work: wrong shapes, ranks, dtypes or options. */
export class AutogradArgumentError extends AutogradError {
  override name = 'AutogradArgumentError';
}

/** A tensor hook returned a gradient of another shape or dtype than the one it received. */
export class GradientHookError extends AutogradArgumentError {
  override name = 'GradientHookError';
}

/**
 * Refuses an option `where` does not know (AutogradArgumentError): an ignored one changed the
 * result silently — `sum(x, { axis: 1 })` summed every element, `conv2d(…, { dilation: 2 })`
 * and `maxPool2d(…, { ceilMode: true })` gave another shape. Its `booleans` must be booleans
 * when given: `{ keepdim: 'false' }` from a config kept the dim.
 */
export function checkOptions(
  where: string,
  opts: object | undefined,
  known: readonly string[],
  booleans: readonly string[] = [],
): void {
  checkOptionNames(where, opts, known, argumentError);
  checkBooleanOptions(where, opts, booleans, argumentError);
}

/** An AutogradArgumentError: what @ddp/tensor's option checks raise here. */
export const argumentError = (message: string) => new AutogradArgumentError(message);

/**
 * ddp's forwards that communicate return Promises where torch's return tensors, so one not
 * awaited reached an op as its input and failed deep inside it, untyped.
 */
export function refusePromises(op: string, args: readonly unknown[]): void {
  const i = args.findIndex((a) => a instanceof Promise);
  if (i >= 0)
    throw new AutogradArgumentError(
      `${op}: argument ${i} is a Promise, not a Tensor: await the call that returned it (an async forward)`,
    );
}

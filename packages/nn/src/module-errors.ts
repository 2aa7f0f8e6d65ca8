import { pendingValueWriter, type Tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';

/** Raised by loadStateDict, naming every problem before anything changed. */
export class StateDictError extends Error {
  override name = 'StateDictError';
  constructor(
    readonly missingKeys: string[],
    readonly unexpectedKeys: string[],
    readonly shapeMismatches: string[],
  ) {
    const parts = [
      missingKeys.length ? `missing keys: ${missingKeys.join(', ')}` : '',
      unexpectedKeys.length ? `unexpected keys: ${unexpectedKeys.join(', ')}` : '',
      shapeMismatches.length ? `shape mismatches: ${shapeMismatches.join('; ')}` : '',
    ];
    super(`error(s) loading state dict: ${parts.filter(Boolean).join('; ')}`);
  }
}

/** Misuse of a module: a bad name, input or registration. */
export class ModuleError extends Error {
  override name = 'ModuleError';
}

/** What a value is, for messages: 'a tf.Tensor', its class name, or its typeof. */
export const kindOf = (v: unknown) =>
  v instanceof tf.Tensor ? 'a tf.Tensor' : ((v as object)?.constructor?.name ?? typeof v);

/**
 * Refuses a module's state an async operation not awaited still writes (`void opt.step()`, a `join`
 * loop, a load): stateDict() took the values of before, loadStateDict's were overwritten, silently.
 */
export function refuseStateBeingWritten(where: string, state: Iterable<[string, Tensor]>): void {
  for (const [key, t] of state) {
    const writer = pendingValueWriter(t);
    if (writer !== null)
      throw new ModuleError(
        `${where}: ${key} is still being written by a running ${writer} (not awaited): await it first`,
      );
  }
}

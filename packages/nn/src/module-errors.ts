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

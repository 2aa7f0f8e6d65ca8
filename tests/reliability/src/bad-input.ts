import { initProcessGroup, isInitialized } from '@ddp/comm';
import { Generator, Linear, Sequential, Tanh } from '@ddp/nn';

/**
 * Bad input at public entry points, one row per call. Each `call` must throw (or reject
 * with) a typed error: an Error subclass with its own name, not a bare Error/TypeError/
 * RangeError and not an error from a dependency (tfjs). `expect` is the error the
 * contract promises; `mustName`, when given, must appear in the message (DDP naming the
 * parameter, the launcher naming the option). The rows live in bad-input-<package>.ts.
 */
export interface BadInputCase {
  pkg: string;
  entry: string;
  input: string;
  expect: string;
  mustName?: string;
  call: () => unknown;
}

const BUILTIN = new Set(['Error', 'TypeError', 'RangeError', 'SyntaxError', 'ReferenceError', 'AggregateError']);

export interface Outcome {
  threw: boolean;
  name: string;
  message: string;
  typed: boolean;
}

export async function attempt(c: BadInputCase): Promise<Outcome> {
  try {
    await c.call();
    return { threw: false, name: '(no error)', message: '', typed: false };
  } catch (e) {
    const name = e instanceof Error ? e.constructor.name : typeof e;
    const message = e instanceof Error ? e.message : String(e);
    const typed =
      e instanceof Error &&
      !BUILTIN.has(e.constructor.name) &&
      !BUILTIN.has(e.name) &&
      (!c.mustName || message.includes(c.mustName));
    return { threw: true, name, message: message.slice(0, 200), typed };
  }
}

export async function world(): Promise<void> {
  if (!isInitialized()) await initProcessGroup({ rank: 0, worldSize: 1, timeoutMs: 10_000 });
}

export const mlp = () => {
  const gen = new Generator(1);
  return new Sequential(new Linear(4, 3, { generator: gen }), new Tanh(), new Linear(3, 2, { generator: gen }));
};

export const params = () => mlp().parameters();

/** torch's spelling → ours: weight_decay → weightDecay. */
const camelCase = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/**
 * Refuses an option name the callee does not know. Options come in objects, and an object
 * that is not a literal (a config ported from PyTorch, a spread) passes TypeScript's checks
 * with any extra key, which was then ignored: `{ lr, weight_decay: 1e-4 }` trained without
 * weight decay, `{ labelSmoothing: 0.1 }` without smoothing. A number or boolean in their place
 * (torch's positional arguments) is refused too. `error` builds the caller's own typed error;
 * `noun` names the names in it (a checkpoint's contents have keys).
 */
export function checkOptionNames(
  where: string,
  options: object | undefined,
  known: readonly string[],
  error: (message: string) => Error,
  noun = 'option',
): void {
  if (options !== undefined && (typeof options !== 'object' || options === null || Array.isArray(options))) {
    // torch's positional arguments (nn.Linear(3, 2, False), nn.LayerNorm(4, 1e-6)) land here, where
    // a number or boolean has no keys and was taken for no options at all
    const got = Array.isArray(options) ? `[${options}]` : String(options);
    throw error(`${where}: options must be an object of named options (${known.join(', ')}), got ${got}`);
  }
  for (const name of Object.keys(options ?? {})) {
    if (known.includes(name)) continue;
    const camel = camelCase(name);
    const hint = camel !== name && known.includes(camel) ? `; did you mean ${camel}?` : ' (ddp does not have it)';
    throw error(`${where}: unknown ${noun} "${name}"${hint}; its ${noun}s are ${known.join(', ')}`);
  }
}

/**
 * Refuses a value outside `allowed` for the option `name` (undefined: the default). TypeScript
 * stops a literal, not a value from a config or a cast: `reduction: 'batchmean'` averaged,
 * `approximate: 'Tanh'` took the erf form, `mode: 'fanout'` took fan_out, silently.
 */
export function checkOptionValue<T extends string>(
  where: string,
  name: string,
  value: unknown,
  allowed: readonly T[],
  error: (message: string) => Error,
): asserts value is T | undefined {
  if (value === undefined || (allowed as readonly unknown[]).includes(value)) return;
  const list = allowed.map((a) => `'${a}'`).join(', ');
  throw error(`${where}: ${name} must be one of ${list}, got ${JSON.stringify(value) ?? String(value)}`);
}

/**
 * A check that each of the options `names` present in an options object (undefined: the default)
 * holds a value `accepts` takes, raising the caller's typed error naming the first that does not.
 */
function typeCheck(what: string, accepts: (value: unknown) => boolean) {
  return (where: string, options: object | undefined, names: readonly string[], error: (m: string) => Error): void => {
    for (const name of names) {
      const value = (options as Record<string, unknown> | undefined)?.[name];
      if (value === undefined || accepts(value)) continue;
      throw error(`${where}: ${name} must be ${what}, got ${JSON.stringify(value) ?? String(value)}`);
    }
  };
}

/**
 * Refuses a value other than true or false for each of the boolean options `names`. A string from a
 * config or CLI is truthy: `dropLast: 'false'` dropped the last items, `maximize: 'false'` stepped
 * uphill, `bias: 'false'` kept the bias, silently.
 */
export const checkBooleanOptions = typeCheck('a boolean', (value) => typeof value === 'boolean');

/**
 * Refuses a value that is not a number (or is NaN) for each of the numeric options `names` (null
 * passes, where an option takes it). A string from a config coerces in comparisons and concatenates
 * in sums: `rand([n], { low: '1', high: 2 })` drew from [10, 11), and `eps: '1e-5'` passed the
 * constructor to fail inside a kernel.
 */
export const checkNumberOptions = typeCheck(
  'a number',
  (value) => value === null || (typeof value === 'number' && !Number.isNaN(value)),
);

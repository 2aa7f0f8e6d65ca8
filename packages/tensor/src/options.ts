/** torch's spelling → ours: weight_decay → weightDecay. */
const camelCase = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/**
 * Refuses an option name the callee does not know. Options come in objects, and an object
 * that is not a literal (a config ported from PyTorch, a spread) passes TypeScript's checks
 * with any extra key, which was then ignored: `{ lr, weight_decay: 1e-4 }` trained without
 * weight decay, `{ labelSmoothing: 0.1 }` without smoothing. `error` builds the caller's own
 * typed error from the message.
 */
export function checkOptionNames(
  where: string,
  options: object | undefined,
  known: readonly string[],
  error: (message: string) => Error,
): void {
  for (const name of Object.keys(options ?? {})) {
    if (known.includes(name)) continue;
    const camel = camelCase(name);
    const hint = camel !== name && known.includes(camel) ? `; did you mean ${camel}?` : ' (ddp does not have it)';
    throw error(`${where}: unknown option "${name}"${hint}; its options are ${known.join(', ')}`);
  }
}

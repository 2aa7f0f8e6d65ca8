/** A launch configuration that cannot run: bad flag values, a missing script, an unshared secret. */
export class LaunchConfigError extends Error {
  override readonly name = 'LaunchConfigError';
}

import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { LaunchConfigError } from './errors.js';

/**
 * Reads the run's secret from a file that only its owner can read (ssh's rule for private
 * keys): a secret on the command line shows in every user's `ps`, one in a readable file
 * leaks just the same.
 */
export function readSecretFile(path: string, cwd: string): string {
  const file = resolve(cwd, path);
  let stat: ReturnType<typeof statSync>;
  try {
    stat = statSync(file);
  } catch (e) {
    throw new LaunchConfigError(`secretFile: cannot read ${file}: ${(e as Error).message}`);
  }
  if (!stat.isFile()) throw new LaunchConfigError(`secretFile: ${file} is not a file`);
  const mode = (stat.mode & 0o777).toString(8).padStart(4, '0');
  if ((stat.mode & 0o077) !== 0) {
    throw new LaunchConfigError(
      `secretFile: ${file} is readable by group or others (mode ${mode}); run chmod 600 ${file}`,
    );
  }
  if (process.getuid && stat.uid !== process.getuid()) {
    throw new LaunchConfigError(
      `secretFile: ${file} belongs to uid ${stat.uid}, not to this user (uid ${process.getuid()})`,
    );
  }
  const secret = readFileSync(file, 'utf8').trim();
  if (secret === '') throw new LaunchConfigError(`secretFile: ${file} is empty`);
  return secret;
}

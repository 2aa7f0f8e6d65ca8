import { Command, InvalidArgumentError, Option } from 'commander';

/**
 * A benchmark's command line: commander parses `process.argv` (what main.ts left of it), a
 * number that does not parse is an error naming the flag, and bad flags exit with 2, like
 * main.ts's usage error.
 */
export function benchCommand(name: string, description: string): Command {
  return new Command(`pnpm bench ${name}`)
    .description(description)
    .allowExcessArguments(false)
    .configureOutput({ writeErr: (s) => process.stderr.write(s) })
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));
}

/** `--rank [value]`: a bench started as one rank of its own world (hidden from --help). */
export const rankFlag = (value = ''): Option =>
  new Option(`--rank ${value}`.trim(), 'run as one rank of the world').hideHelp();

function number(check: (n: number) => boolean, what: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !check(n)) throw new InvalidArgumentError(`not ${what}.`);
    return n;
  };
}

export const positiveInt = number((n) => Number.isInteger(n) && n > 0, 'a positive integer');
export const positiveNumber = number((n) => Number.isFinite(n) && n > 0, 'a positive number');

/** A comma-separated list of positive integers (`--worlds 2,4`). */
export function positiveIntList(value: string): number[] {
  return value.split(',').map((part) => {
    try {
      return positiveInt(part);
    } catch {
      throw new InvalidArgumentError(`not a comma-separated list of positive integers.`);
    }
  });
}

/** A comma-separated list of choices (`--modes ddp,fsdp`). */
export function choiceList<T extends string>(choices: readonly T[]): (value: string) => T[] {
  return (value) =>
    value.split(',').map((part) => {
      if (!choices.includes(part as T))
        throw new InvalidArgumentError(`'${part}' is not one of ${choices.join(', ')}.`);
      return part as T;
    });
}

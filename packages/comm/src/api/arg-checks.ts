import { type CommArray, checkMovable } from '../dtypes.js';
import { InvalidArgumentError } from '../errors.js';

/**
 * The argument checks every process group makes before a call, so each backend refuses bad
 * input with the same error and wording. `me` is the caller's global rank, `size` the group's.
 */

/**
 * Refuses an option `where` does not know: an ignored one changed the call silently — a ported
 * `{ reduce_op: ReduceOp.MAX }` summed, `initProcessGroup({ world_size: 4 })` took WORLD_SIZE
 * from the environment. (@ddp/tensor's checkOptionNames does this above comm's layer.)
 */
export function checkOptionKeys(where: string, opts: object | undefined, known: readonly string[], me?: number): void {
  for (const name in opts) {
    if (known.includes(name)) continue;
    const camel = name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    const hint = camel !== name && known.includes(camel) ? `; did you mean ${camel}?` : ' (ddp does not have it)';
    const list = known.length ? `its options are ${known.join(', ')}` : 'it takes none';
    const who = me === undefined ? '' : `rank ${me}: `;
    throw new InvalidArgumentError(`${who}${where}: unknown option "${name}"${hint}; ${list}`, { op: where });
  }
}

/**
 * barrier takes nothing: a timeout given to it, as to torch's monitored_barrier, was ignored and the
 * call waited the group's whole timeout (probe BW).
 */
export function checkNoArguments(where: string, args: unknown[], me: number): void {
  if (args.every((a) => a === undefined)) return;
  throw new InvalidArgumentError(
    `rank ${me}: ${where} takes no arguments (${args.length} given): the group's timeoutMs bounds it; ` +
      'for a shorter one, call it on duplicateGroup(group, { timeoutMs })',
    { op: where },
  );
}

/** Each collective's options, for checkOptionKeys (both backends). */
export const COLLECTIVE_OPTIONS: Record<string, readonly string[]> = {
  allReduce: ['op', 'dtype'],
  reduce: ['dst', 'op', 'dtype'],
  reduceScatter: ['op', 'dtype', 'overwriteInput'],
  broadcast: ['src', 'dtype'],
  allGather: ['dtype'],
  allGatherInto: ['dtype'],
  gather: ['dst', 'dtype'],
  scatter: ['src', 'inputs', 'dtype'],
  allToAll: ['dtype'],
  barrier: [],
};

/** A root or peer must be a rank of the group, given as a number (a '1' from argv or JSON says so). */
export function checkRoot(root: number, size: number, me: number, what: string): void {
  if (typeof root !== 'number') {
    const shown = typeof root === 'string' ? `the string '${root}'` : `${typeof root} ${String(root)}`;
    throw new InvalidArgumentError(`rank ${me}: ${what} must be an integer rank, got ${shown}`, { op: what });
  }
  if (!Number.isInteger(root) || root < 0 || root >= size) {
    throw new InvalidArgumentError(`rank ${me}: ${what} ${root} is not a rank of this group of ${size}`, { op: what });
  }
}

/** Tags the backends carry: integers in [0, 2^24) (on MPI, −1 was MPI_ANY_TAG: a receive took any message). */
const TAG_LIMIT = 2 ** 24;

/** A send or receive goes to another rank of the group (`rank`: the caller's rank in it). */
export function checkPeer(op: 'isend' | 'irecv', peer: number, size: number, rank: number, me: number, tag = 0): void {
  checkRoot(peer, size, me, `${op} peer`);
  if (peer === rank) throw new InvalidArgumentError(`rank ${me}: ${op} to itself`, { op });
  if (!(Number.isInteger(tag) && tag >= 0 && tag < TAG_LIMIT))
    throw new InvalidArgumentError(`rank ${me}: ${op} tag must be an integer in [0, 2^24), got ${tag}`, { op });
}

/** allGatherInto's output holds `size` inputs. */
export function checkGatherInto(output: CommArray, input: CommArray, size: number): void {
  checkMovable(output, 'allGatherInto');
  if (output.length !== input.length * size || output.constructor !== input.constructor) {
    throw new InvalidArgumentError(
      `allGatherInto: output needs ${size} × ${input.length} elements of the input's type, got ${output.length}`,
      { op: 'allGatherInto' },
    );
  }
}

/** reduceScatter's input holds `size` outputs. */
export function checkReduceScatter(output: CommArray, input: CommArray, size: number, overwriteInput?: unknown): void {
  // 'false' from a config was truthy: the caller's input was overwritten where it was meant kept
  if (overwriteInput !== undefined && typeof overwriteInput !== 'boolean') {
    const got = JSON.stringify(overwriteInput) ?? String(overwriteInput);
    throw new InvalidArgumentError(`reduceScatter: overwriteInput must be a boolean, got ${got}`, {
      op: 'reduceScatter',
    });
  }
  checkMovable(input, 'reduceScatter');
  if (input.length !== output.length * size || output.constructor !== input.constructor) {
    throw new InvalidArgumentError(
      `reduceScatter: input needs ${size} × ${output.length} elements of the output's type, got ${input.length}`,
      { op: 'reduceScatter' },
    );
  }
}

/** allToAll has one output and one input per member, all of one array type (the dtype is taken from one). */
export function checkAllToAll(outputs: CommArray[], inputs: CommArray[], size: number): void {
  if (outputs.length !== size || inputs.length !== size) {
    throw new InvalidArgumentError(
      `allToAll: needs ${size} outputs and inputs, got ${outputs.length} and ${inputs.length}`,
      { op: 'allToAll' },
    );
  }
  const types = new Set([...inputs, ...outputs].map((a) => a.constructor));
  if (types.size > 1) {
    const names = [...types].map((t) => t.name).join(', ');
    throw new InvalidArgumentError(`allToAll: inputs and outputs must all be one array type, got ${names}`, {
      op: 'allToAll',
    });
  }
}

/**
 * scatter's src holds one input per member, each of the output's array type (the bytes travel
 * as the output's dtype: an Int32Array input into a Float32Array output would be reinterpreted),
 * its own as long as the output.
 */
export function checkScatterInputs(
  output: CommArray,
  inputs: CommArray[] | undefined,
  size: number,
  rank: number,
  me: number,
): asserts inputs is CommArray[] {
  const fail = (why: string) => {
    throw new InvalidArgumentError(`rank ${me}: scatter: ${why}`, { op: 'scatter' });
  };
  if (!inputs || inputs.length !== size) fail(`the src rank needs ${size} inputs, got ${inputs?.length ?? 0}`);
  const list = inputs as CommArray[];
  const other = list.findIndex((a) => a.constructor !== output.constructor);
  if (other >= 0) {
    const got = (list[other] as CommArray).constructor.name;
    fail(
      `input ${other} is of type ${got}, the output of ${output.constructor.name}: inputs must be the output's type`,
    );
  }
  const own = list[rank] as CommArray;
  if (own.length !== output.length) fail(`input ${rank} has ${own.length} elements, output ${output.length}`);
}

import { deserialize, serialize } from 'node:v8';
import { InvalidArgumentError } from '../errors.js';
import { checkOptionKeys } from './arg-checks.js';
import type { ProcessGroup } from './group.js';
import { groupOrWorld } from './subgroups.js';

/**
 * torch's all_gather_object, broadcast_object_list, gather_object and scatter_object_list: any value
 * the structured clone takes (nested objects, Map, Set, Date, bigint, typed arrays, undefined, NaN,
 * cycles) travels as bytes in an Int32Array through the group's own collectives, on either backend.
 * A value that cannot be cloned (a function, a class's private state) is sent as a marker instead, so
 * every member completes the collective and then raises the same InvalidArgumentError naming the rank
 * (torch raises on that rank only, and its peers wait for bytes that never come). Like torch's pickle,
 * deserializing trusts the peers: they are the job's own ranks (the store's secret admits them).
 */

/** Words of an encoded value: the byte length (UNCLONABLE: the value could not be cloned), then the bytes. */
const UNCLONABLE = -1;

type Encoded = { words: Int32Array; error: string | null };

function encode(value: unknown): Encoded {
  let bytes: Uint8Array;
  try {
    bytes = serialize(value);
  } catch (e) {
    return { words: Int32Array.of(UNCLONABLE), error: `the structured clone refuses it: ${(e as Error).message}` };
  }
  const words = new Int32Array(1 + Math.ceil(bytes.length / 4));
  words[0] = bytes.length;
  new Uint8Array(words.buffer, 4).set(bytes);
  return { words, error: null };
}

/** What every member raises when `failed` (a group rank) could not send its value; `detail` on that rank. */
function unsent(group: ProcessGroup, where: string, failed: number, detail: string | null): InvalidArgumentError {
  const [me, them] = [group.ranks[group.rank], group.ranks[failed]];
  const why = failed === group.rank && detail ? detail : `see rank ${them}'s error`;
  return new InvalidArgumentError(`rank ${me}: ${where}: rank ${them} could not send its value (${why})`, {
    op: where,
    rank: me,
    ranks: [them],
  });
}

/** Each member's value from its words (indexed by group rank), after checking that every one was sent. */
function decodeAll(group: ProcessGroup, where: string, all: Int32Array[], mine: Encoded): unknown[] {
  const failed = all.findIndex((w) => w[0] === UNCLONABLE);
  if (failed >= 0) throw unsent(group, where, failed, mine.error);
  return all.map(decode);
}

function decode(words: Int32Array): unknown {
  return deserialize(new Uint8Array(words.buffer, words.byteOffset + 4, words[0]));
}

function groupFor(where: string, opts: object | undefined, known: string[]): ProcessGroup {
  // broadcastObject(v) without its options read opts.group of undefined: a TypeError (probe CB)
  if (typeof opts !== 'object' || opts === null)
    throw new InvalidArgumentError(`${where}: takes its options ({ ${known.join(', ')} }) after the value`, {
      op: where,
    });
  checkOptionKeys(where, opts, known);
  return groupOrWorld((opts as { group?: ProcessGroup | null }).group, where);
}

/**
 * The group rank of `global`, a source or destination given as torch's object collectives take it: a
 * global rank (on a subgroup [1, 2], `src: 1` was read as group rank 1, global rank 2: another rank's
 * value, silently; probe DD). One not in the group is refused.
 */
function memberRank(group: ProcessGroup, where: string, name: string, global: number): number {
  const r = Number.isInteger(global) ? group.ranks.indexOf(global) : -1;
  if (r >= 0) return r;
  const me = group.ranks[group.rank];
  const why = `${name} ${global} is not a rank of the group [${group.ranks.join(', ')}] (a global rank, as torch's)`;
  throw new InvalidArgumentError(`rank ${me}: ${where}: ${why}`, { op: where, rank: me });
}

/** Every member's `value`, in group-rank order (torch's all_gather_object). */
export async function allGatherObject<T>(value: T, opts: { group?: ProcessGroup | null } = {}): Promise<T[]> {
  const group = groupFor('allGatherObject', opts, ['group']);
  const mine = encode(value);
  const all = (await group.allGather(mine.words).wait()) as Int32Array[];
  return decodeAll(group, 'allGatherObject', all, mine) as T[];
}

/** `src`'s value on every member (torch's broadcast_object_list, one value); others pass anything. */
export async function broadcastObject<T>(value: T, opts: { src: number; group?: ProcessGroup | null }): Promise<T> {
  const group = groupFor('broadcastObject', opts, ['src', 'group']);
  const src = memberRank(group, 'broadcastObject', 'src', opts.src);
  const mine = group.rank === src ? encode(value) : { words: Int32Array.of(0), error: null };
  const length = Int32Array.of(mine.words.length);
  await group.broadcast(length, { src }).wait();
  const words = group.rank === src ? mine.words : new Int32Array(length[0]);
  await group.broadcast(words, { src }).wait();
  if (words[0] === UNCLONABLE) throw unsent(group, 'broadcastObject', src, mine.error);
  return decode(words) as T;
}

/** Every member's value on `dst`, in group-rank order, null elsewhere (torch's gather_object). */
export async function gatherObject<T>(
  value: T,
  opts: { dst: number; group?: ProcessGroup | null },
): Promise<T[] | null> {
  const group = groupFor('gatherObject', opts, ['dst', 'group']);
  const dst = memberRank(group, 'gatherObject', 'dst', opts.dst);
  const mine = encode(value);
  const all = (await group.gather(mine.words, { dst }).wait()) as Int32Array[] | null;
  // only dst sees the others' words: it tells every member which one could not send (−1: none), so all raise
  const failed = Int32Array.of(all ? all.findIndex((w) => w[0] === UNCLONABLE) : 0);
  await group.broadcast(failed, { src: dst }).wait();
  if (failed[0] >= 0) throw unsent(group, 'gatherObject', failed[0], mine.error);
  return all === null ? null : (all.map(decode) as T[]);
}

/** values[r] from `src` on member r (torch's scatter_object_list); only src's `values` are read. */
export async function scatterObject<T>(
  values: T[] | null,
  opts: { src: number; group?: ProcessGroup | null },
): Promise<T> {
  const group = groupFor('scatterObject', opts, ['src', 'group']);
  const src = memberRank(group, 'scatterObject', 'src', opts.src);
  const isSrc = group.rank === src;
  let encoded: Encoded[] = [];
  if (isSrc && (!Array.isArray(values) || values.length !== group.size)) {
    const error = `values must be an array of ${group.size} values, one per member`;
    encoded = [{ words: Int32Array.of(UNCLONABLE), error }];
  } else if (isSrc) encoded = values!.map(encode);
  // the longest encoding first, so every member receives into a buffer of one size; UNCLONABLE: src cannot send
  const bad = encoded.find((e) => e.error !== null);
  const longest = Int32Array.of(bad ? UNCLONABLE : Math.max(0, ...encoded.map((e) => e.words.length)));
  await group.broadcast(longest, { src }).wait();
  if (longest[0] === UNCLONABLE) throw unsent(group, 'scatterObject', src, bad?.error ?? null);
  const padded = encoded.map((e) => {
    const w = new Int32Array(longest[0]);
    w.set(e.words);
    return w;
  });
  const output = new Int32Array(longest[0]);
  await group.scatter(output, isSrc ? { src, inputs: padded } : { src }).wait();
  return decode(output) as T;
}

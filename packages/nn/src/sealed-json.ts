/**
 * The JSON files of a checkpoint (checkpoint.json, the sharded manifests) carry a CRC-32 of their
 * content, so a flipped bit in a step count or a learning rate is an error naming the file rather
 * than a resumed run that differs silently (tensor data has checksums of its own: safetensors.ts).
 */
import { readFile } from 'node:fs/promises';
import { crc32 } from 'node:zlib';
import { CheckpointError } from './checkpoint-errors.js';

/** The key holding the checksum, written last. */
const SEAL = 'crc32';
const checksum = (text: string) => crc32(text).toString(16).padStart(8, '0');

/** A JSON file that does not parse or fails its checksum. */
export class SealedJsonError extends Error {
  override name = 'SealedJsonError';
  constructor(
    readonly path: string,
    why: string,
  ) {
    super(`${path} ${why}`);
  }
}

/**
 * Where `value` holds something JSON would not give back (path and what), or null. An undefined
 * property is dropped, which reads back the same (absent); -0 reads back as 0, equal. `within`: the
 * arrays and objects on the way down (a value holding itself overflowed the stack, a RangeError; probe CE).
 */
function lossyJson(value: unknown, path: string, within: object[] = []): string | null {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return null;
  if (typeof value === 'number')
    return Number.isFinite(value) ? null : `${path} is ${value} (it would read back as null)`;
  if (typeof value !== 'object') return `${path} is a ${typeof value}`;
  if (within.includes(value)) return `${path} holds itself (a cycle)`;
  const inner = [...within, value];
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const at = `${path}[${i}]`;
      const why = !(i in value)
        ? `${at} is empty`
        : value[i] === undefined
          ? `${at} is undefined (it would read back as null)`
          : lossyJson(value[i], at, inner);
      if (why) return why;
    }
    return null;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null)
    return `${path} is a ${value.constructor?.name ?? 'class instance'}`;
  for (const [k, v] of Object.entries(value)) {
    const why = v === undefined ? null : lossyJson(v, path ? `${path}.${k}` : k, inner);
    if (why) return why;
  }
  return null;
}

/**
 * `value` as indented JSON, its last key the CRC-32 of `JSON.stringify(value)`. Refuses
 * (CheckpointError) a value JSON would change: `extra: { best: Infinity }` loaded as null, a Map
 * or a Set as {}, a Date as a string, silently.
 */
export function sealJson(value: Record<string, unknown>): string {
  const why = lossyJson(value, '');
  if (why) {
    throw new CheckpointError(
      `checkpoint metadata: ${why}, which JSON cannot keep; store plain numbers, strings, booleans, arrays and objects`,
    );
  }
  return `${JSON.stringify({ ...value, [SEAL]: checksum(JSON.stringify(value)) }, null, 2)}\n`;
}

/**
 * Parses JSON written by sealJson and checks its checksum: re-serialising a parsed value gives the
 * written text back (same key order, same number spellings), so any changed value fails it.
 * `sealed` is false for JSON without a checksum (written before there was one); the caller decides
 * from the format's version whether that is acceptable.
 */
export function parseSealedJson(text: string, path: string): { value: Record<string, unknown>; sealed: boolean } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new SealedJsonError(path, `is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new SealedJsonError(path, 'is not a JSON object');
  const { [SEAL]: stored, ...value } = parsed as Record<string, unknown>;
  if (stored === undefined) return { value, sealed: false };
  const found = checksum(JSON.stringify(value));
  if (stored !== found)
    throw new SealedJsonError(path, `fails its checksum (CRC-32 ${found}, stored ${String(stored)})`);
  return { value, sealed: true };
}

/**
 * Reads a checkpoint's JSON file of `format`: a sealed version from 2 up to `version` (the newest a
 * reader knows), or version 1, which predates the checksums and is read without. Every failure
 * (missing, not JSON, a checksum, another format) is a SealedJsonError naming the file.
 */
export async function readSealedJson(path: string, format: string, version: number): Promise<Record<string, unknown>> {
  const text = await readFile(path, 'utf8').catch((error: Error) => {
    throw new SealedJsonError(path, `cannot be read: ${error.message}`);
  });
  const { value, sealed } = parseSealedJson(text, path);
  const known = typeof value.version === 'number' && Number.isInteger(value.version) && value.version >= 1;
  if (value.format !== format || !known || (value.version as number) > version)
    throw new SealedJsonError(path, `is not a ${format} (versions 1 to ${version})`);
  if (value.version !== 1 && !sealed) throw new SealedJsonError(path, 'has no checksum');
  return value;
}

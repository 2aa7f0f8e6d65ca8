// Reading safetensors files: every length, offset, shape and checksum checked (format: safetensors.ts).
import { readFile } from 'node:fs/promises';
import { checkBooleanOptions, DTYPES, type DType, type TypedArray } from '@ddp/tensor';
import { CHECKSUMS, CODE, checksum, METADATA, numel, type SafeTensor, SafetensorsError } from './safetensors.js';

/** How a stored dtype is read: its element size and the dtype and array it becomes. */
interface Reader {
  dtype: DType;
  bytes: number;
  decode(raw: ArrayBuffer, n: number, name: string): TypedArray;
}
const READERS = new Map<string, Reader>(
  Object.entries(CODE).map(([dtype, code]) => {
    const { ArrayType, bytesPerElement } = DTYPES[dtype as DType];
    return [code, { dtype: dtype as DType, bytes: bytesPerElement, decode: (raw, n) => new ArrayType(raw, 0, n) }];
  }),
);
// PyTorch stores integer buffers (BatchNorm's num_batches_tracked) as int64: read them as int32.
READERS.set('I64', {
  dtype: 'int32',
  bytes: 8,
  decode: (raw, n, name) => {
    const wide = new BigInt64Array(raw, 0, n);
    const out = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      const v = wide[i];
      if (v < -2147483648n || v > 2147483647n)
        throw new SafetensorsError('unsupported', `tensor '${name}': I64 value ${v} does not fit int32`);
      out[i] = Number(v);
    }
    return out;
  },
});
/** Header sizes above this are taken for corruption (the reference reader's limit). */
const MAX_HEADER_BYTES = 100_000_000;

export interface ParsedSafetensors {
  tensors: Map<string, SafeTensor>;
  metadata: Record<string, string>;
}

function isNonNegativeInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function parseHeader(bytes: Uint8Array, source: string): { header: Record<string, unknown>; dataStart: number } {
  if (bytes.length < 8)
    throw new SafetensorsError('truncated', `${source}: ${bytes.length} bytes, shorter than the 8-byte header length`);
  const n = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER_BYTES))
    throw new SafetensorsError('corrupt', `${source}: header length ${n} is implausible`);
  const headerLength = Number(n);
  if (8 + headerLength > bytes.length) {
    throw new SafetensorsError(
      'truncated',
      `${source}: header says ${headerLength} bytes but only ${bytes.length - 8} follow`,
    );
  }
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + headerLength)));
  } catch (error) {
    throw new SafetensorsError('corrupt', `${source}: header is not valid UTF-8 JSON (${(error as Error).message})`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) {
    throw new SafetensorsError('corrupt', `${source}: header is not a JSON object`);
  }
  return { header: header as Record<string, unknown>, dataStart: 8 + headerLength };
}

function parseMetadata(value: unknown, source: string): Record<string, string> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Object.values(value).some((v) => typeof v !== 'string')) {
    throw new SafetensorsError('corrupt', `${source}: __metadata__ must map strings to strings`);
  }
  return value as Record<string, string>;
}

/** The per-tensor checksums (undefined for files written elsewhere, which carry none). */
function parseChecksums(value: string | undefined, source: string): Record<string, string> | undefined {
  if (value === undefined) return undefined;
  try {
    const parsed = JSON.parse(value) as unknown;
    if (typeof parsed === 'object' && parsed !== null && Object.values(parsed).every((v) => typeof v === 'string')) {
      return parsed as Record<string, string>;
    }
  } catch {
    // reported below
  }
  throw new SafetensorsError('corrupt', `${source}: metadata '${CHECKSUMS}' is not a JSON object of checksums`);
}

export interface ParseOptions {
  /** Refuse a file without checksums (of every tensor and of the metadata). */
  requireChecksums?: boolean;
}

/**
 * The metadata's own checksum (files written before it existed have none), and every checksum must
 * name a tensor of the file: a flipped bit in a name is not an unchecked tensor.
 */
function checkMetadataChecksum(
  checksums: Record<string, string> | undefined,
  metadata: Record<string, string>,
  header: Record<string, unknown>,
  source: string,
  required: boolean,
): void {
  if (!checksums) {
    if (required) throw new SafetensorsError('corrupt', `${source}: no checksums (metadata '${CHECKSUMS}')`);
    return;
  }
  const stray = Object.keys(checksums).find((name) => name !== METADATA && !Object.hasOwn(header, name));
  if (stray !== undefined) throw new SafetensorsError('corrupt', `${source}: a checksum names no tensor ('${stray}')`);
  const expected = checksums[METADATA];
  if (expected === undefined) {
    if (required) throw new SafetensorsError('corrupt', `${source}: the metadata has no checksum`);
    return;
  }
  const found = checksum(new TextEncoder().encode(JSON.stringify(metadata)));
  if (found !== expected)
    throw new SafetensorsError(
      'checksum',
      `${source}: the metadata fails its checksum (CRC-32 ${found}, stored ${expected})`,
    );
}

export function parseSafetensors(
  bytes: Uint8Array,
  source = 'safetensors data',
  options: ParseOptions = {},
): ParsedSafetensors {
  checkBooleanOptions('parseSafetensors', options, ['requireChecksums'], (m) => new SafetensorsError('invalid', m));
  const { requireChecksums = false } = options;
  const { header, dataStart } = parseHeader(bytes, source);
  const dataLength = bytes.length - dataStart;
  const { [CHECKSUMS]: stored, ...metadata } = parseMetadata(header.__metadata__, source);
  const checksums = parseChecksums(stored, source);
  checkMetadataChecksum(checksums, metadata, header, source, requireChecksums);
  const spans: { name: string; begin: number; end: number; reader: Reader; shape: number[] }[] = [];
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const { dtype: code, shape, data_offsets: offsets } = (entry ?? {}) as Record<string, unknown>;
    if (typeof code !== 'string') throw new SafetensorsError('corrupt', `${source}: tensor '${name}' has no dtype`);
    const reader = READERS.get(code);
    if (!reader)
      throw new SafetensorsError(
        'unsupported',
        `${source}: tensor '${name}' has dtype ${code}, not one of ${[...READERS.keys()].join(', ')}`,
      );
    if (!Array.isArray(shape) || !shape.every(isNonNegativeInt))
      throw new SafetensorsError('corrupt', `${source}: tensor '${name}' has a bad shape`);
    if (
      !Array.isArray(offsets) ||
      offsets.length !== 2 ||
      !offsets.every(isNonNegativeInt) ||
      offsets[0] > offsets[1]
    ) {
      throw new SafetensorsError(
        'corrupt',
        `${source}: tensor '${name}' has bad data_offsets ${JSON.stringify(offsets)}`,
      );
    }
    const [begin, end] = offsets as [number, number];
    if (end - begin !== numel(shape) * reader.bytes) {
      throw new SafetensorsError(
        'corrupt',
        `${source}: tensor '${name}' spans ${end - begin} bytes, shape [${shape.join(', ')}] of ${code} needs ` +
          `${numel(shape) * reader.bytes}`,
      );
    }
    if (end > dataLength) {
      throw new SafetensorsError(
        'truncated',
        `${source}: tensor '${name}' ends at byte ${end} of the data, which has only ${dataLength}`,
      );
    }
    spans.push({ name, begin, end, reader, shape: shape as number[] });
  }
  // The spec asks the data to be covered exactly: no overlaps, no holes.
  // by begin, then end: an empty tensor at the offset where another starts is valid in either order
  const sorted = [...spans].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let covered = 0;
  for (const s of sorted) {
    if (s.begin !== covered)
      throw new SafetensorsError(
        'corrupt',
        `${source}: tensor '${s.name}' starts at ${s.begin}, expected ${covered} (overlap or hole)`,
      );
    covered = s.end;
  }
  if (covered !== dataLength)
    throw new SafetensorsError('corrupt', `${source}: ${dataLength - covered} trailing bytes after the last tensor`);
  const tensors = new Map<string, SafeTensor>();
  for (const s of spans) {
    // a copy, aligned and detached from the file buffer; not `bytes.slice`, which on a Node Buffer (a
    // readFileSync's result) is a view: its decode read from the start of the file, garbage, silently
    const copy = new Uint8Array(bytes.subarray(dataStart + s.begin, dataStart + s.end));
    const expected = checksums && Object.hasOwn(checksums, s.name) ? checksums[s.name] : undefined;
    if (checksums && expected === undefined) {
      throw new SafetensorsError('corrupt', `${source}: tensor '${s.name}' has no checksum`);
    }
    if (expected !== undefined && checksum(copy) !== expected) {
      const found = checksum(copy);
      const why = `tensor '${s.name}' fails its checksum (CRC-32 ${found}, stored ${expected})`;
      throw new SafetensorsError('checksum', `${source}: ${why}`);
    }
    const data = s.reader.decode(copy.buffer, copy.length / s.reader.bytes, s.name);
    tensors.set(s.name, { dtype: s.reader.dtype, shape: s.shape, data });
  }
  return { tensors, metadata };
}
export async function loadSafetensors(path: string, options?: ParseOptions): Promise<ParsedSafetensors> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
    const why = missing ? 'no such file' : (error as Error).message;
    throw new SafetensorsError(missing ? 'missing' : 'unreadable', `${path}: ${why}`, { cause: error });
  }
  return parseSafetensors(new Uint8Array(bytes), path, options);
}

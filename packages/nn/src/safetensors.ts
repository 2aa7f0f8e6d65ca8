/**
 * The safetensors format (huggingface/safetensors): an 8-byte little-endian header length N,
 * N bytes of JSON `{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {…}}`,
 * then the tensors' bytes, little-endian, offsets relative to the end of the header.
 * Reading checks every length, offset and shape, and raises SafetensorsError on bad input.
 * Written dtypes: F32, F64, I32, F16, BF16; read also: I64 (as int32, range-checked).
 * Writing stores each tensor's CRC-32 in the metadata (key `ddp.crc32`, a JSON object by tensor
 * name, and `__metadata__` for the other metadata entries); reading verifies them when present, so a
 * flipped bit is an error naming the tensor. Checkpoints ask for them (`requireChecksums`): a bit
 * flipped in the key's name must not pass as a file written elsewhere, unchecked.
 */
import { readFile } from 'node:fs/promises';
import { crc32 } from 'node:zlib';
import { DTYPES, type DType, type TypedArray, tensorToTypedArraySync, type tf } from '@ddp/tensor';
import { writeFileAtomic, writeFileAtomicSync } from './atomic.js';

export interface SafeTensor {
  dtype: DType;
  shape: number[];
  /** Elements; Uint16Array holds float16/bfloat16 bits. */
  data: TypedArray;
}

/** A copy of a tf tensor's values as a SafeTensor (int32 stays int32, everything else float32). */
export function toSafeTensor(t: tf.Tensor): SafeTensor {
  const dtype: DType = t.dtype === 'int32' ? 'int32' : 'float32';
  return { dtype, shape: [...t.shape], data: tensorToTypedArraySync(t, dtype) };
}

export type SafetensorsErrorKind =
  | 'truncated'
  | 'corrupt'
  | 'checksum'
  | 'unsupported'
  | 'invalid'
  | 'missing'
  | 'unreadable';

export class SafetensorsError extends Error {
  override name = 'SafetensorsError';
  constructor(
    readonly kind: SafetensorsErrorKind,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

const CODE: Record<DType, string> = { float32: 'F32', float64: 'F64', int32: 'I32', float16: 'F16', bfloat16: 'BF16' };
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

if (new Uint8Array(Uint16Array.of(1).buffer)[0] !== 1) throw new Error('safetensors needs a little-endian machine');

const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
/** The metadata key holding the tensors' checksums. */
const CHECKSUMS = 'ddp.crc32';
/** The checksums' entry for the metadata (a name no tensor has). */
const METADATA = '__metadata__';
const checksum = (bytes: Uint8Array) => crc32(bytes).toString(16).padStart(8, '0');
const bytesOf = (t: TypedArray) => new Uint8Array(t.buffer, t.byteOffset, t.byteLength);

/**
 * The file as parts to write in order, without copying the tensors' bytes: the header (length
 * and JSON, with the checksums) and a view of each tensor's data.
 */
function safetensorsParts(
  tensors: Iterable<[string, SafeTensor]> | Record<string, SafeTensor>,
  metadata: Record<string, string> = {},
): Uint8Array[] {
  const entries = Symbol.iterator in tensors ? [...tensors] : Object.entries(tensors);
  if (CHECKSUMS in metadata) {
    throw new SafetensorsError('invalid', `metadata key '${CHECKSUMS}' is reserved for the checksums`);
  }
  const head: Record<string, unknown> = { __metadata__: null };
  const checksums: Record<string, string> = {};
  let offset = 0;
  for (const [name, t] of entries) {
    if (name === '__metadata__') throw new SafetensorsError('invalid', "a tensor may not be named '__metadata__'");
    const info = DTYPES[t.dtype];
    if (!info || !(t.data instanceof info.ArrayType)) {
      throw new SafetensorsError(
        'invalid',
        `tensor '${name}': dtype ${t.dtype} needs its own typed array, got ${t.data.constructor.name}`,
      );
    }
    if (numel(t.shape) !== t.data.length) {
      throw new SafetensorsError(
        'invalid',
        `tensor '${name}': ${t.data.length} elements do not fill shape [${t.shape.join(', ')}]`,
      );
    }
    head[name] = { dtype: CODE[t.dtype], shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    checksums[name] = checksum(bytesOf(t.data));
    offset += t.data.byteLength;
  }
  checksums[METADATA] = checksum(new TextEncoder().encode(JSON.stringify(metadata)));
  head.__metadata__ = { ...metadata, [CHECKSUMS]: JSON.stringify(checksums) };
  let json = JSON.stringify(head);
  json += ' '.repeat((8 - ((Buffer.byteLength(json) + 8) % 8)) % 8); // pad so the data starts 8-aligned
  const json8 = new TextEncoder().encode(json);
  const header = new Uint8Array(8 + json8.length);
  new DataView(header.buffer).setBigUint64(0, BigInt(json8.length), true);
  header.set(json8, 8);
  return [header, ...entries.map(([, t]) => bytesOf(t.data))];
}

export function serializeSafetensors(
  tensors: Iterable<[string, SafeTensor]> | Record<string, SafeTensor>,
  metadata: Record<string, string> = {},
): Uint8Array {
  const parts = safetensorsParts(tensors, metadata);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  parts.reduce((at, p) => {
    out.set(p, at);
    return at + p.length;
  }, 0);
  return out;
}

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
  { requireChecksums = false }: ParseOptions = {},
): ParsedSafetensors {
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
  const sorted = [...spans].sort((a, b) => a.begin - b.begin);
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
    const copy = bytes.slice(dataStart + s.begin, dataStart + s.end); // copy: aligned and detached from the file buffer
    const expected = checksums?.[s.name];
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

export async function saveSafetensors(
  path: string,
  tensors: Iterable<[string, SafeTensor]> | Record<string, SafeTensor>,
  metadata?: Record<string, string>,
): Promise<void> {
  await writeFileAtomic(path, serializeSafetensors(tensors, metadata));
}

/** saveSafetensors blocking the calling thread (a writer thread's), the tensors written from their own arrays. */
export function saveSafetensorsSync(
  path: string,
  tensors: Iterable<[string, SafeTensor]> | Record<string, SafeTensor>,
  metadata?: Record<string, string>,
): void {
  writeFileAtomicSync(path, safetensorsParts(tensors, metadata));
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

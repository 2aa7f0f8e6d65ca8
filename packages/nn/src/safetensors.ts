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
import { crc32 } from 'node:zlib';
import { DTYPES, type DType, type TypedArray, tensorToTypedArraySync, tf } from '@ddp/tensor';
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

export const CODE: Record<DType, string> = {
  float32: 'F32',
  float64: 'F64',
  int32: 'I32',
  float16: 'F16',
  bfloat16: 'BF16',
};

if (new Uint8Array(Uint16Array.of(1).buffer)[0] !== 1) throw new Error('safetensors needs a little-endian machine');

export const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
/** The metadata key holding the tensors' checksums. */
export const CHECKSUMS = 'ddp.crc32';
/** The checksums' entry for the metadata (a name no tensor has). */
export const METADATA = '__metadata__';
export const checksum = (bytes: Uint8Array) => crc32(bytes).toString(16).padStart(8, '0');
export const bytesOf = (t: TypedArray) => new Uint8Array(t.buffer, t.byteOffset, t.byteLength);

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
  // objects without a prototype: a tensor named __proto__ set the prototype of a plain one, so the
  // header left it out while its bytes were written (a file no reader could load)
  const head: Record<string, unknown> = Object.create(null);
  head.__metadata__ = null;
  const checksums: Record<string, string> = Object.create(null);
  let offset = 0;
  for (const [name, t] of entries) {
    if (name === '__metadata__') throw new SafetensorsError('invalid', "a tensor may not be named '__metadata__'");
    // a tf.Tensor (a stateDict()'s values) has dtype, shape and a data() method: said as such (probe BD)
    if (t instanceof tf.Tensor)
      throw new SafetensorsError(
        'invalid',
        `tensor '${name}' is a tf.Tensor; give { dtype, shape, data } (toSafeTensor(t) makes one)`,
      );
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

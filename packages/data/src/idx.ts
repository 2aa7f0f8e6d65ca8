import { IdxFormatError } from './errors.js';

/** Element types of the IDX format, by the type code in the magic number's third byte. */
const IDX_TYPES = [
  { code: 0x08, dtype: 'uint8', bytes: 1 },
  { code: 0x09, dtype: 'int8', bytes: 1 },
  { code: 0x0b, dtype: 'int16', bytes: 2 },
  { code: 0x0c, dtype: 'int32', bytes: 4 },
  { code: 0x0d, dtype: 'float32', bytes: 4 },
  { code: 0x0e, dtype: 'float64', bytes: 8 },
] as const;

export type IdxDtype = (typeof IDX_TYPES)[number]['dtype'];

export interface IdxArray {
  dtype: IdxDtype;
  shape: number[];
  data: Uint8Array | Int8Array | Int16Array | Int32Array | Float32Array | Float64Array;
}

/**
 * Parses an IDX file (the format of LeCun's MNIST files): magic = two zero bytes, a type
 * code, the number of dimensions; then each dimension as a big-endian uint32; then the
 * values, big-endian, row-major. Every size is checked against the buffer before it is
 * read: a short, overlong or corrupted file raises IdxFormatError. uint8 data is returned as
 * a view on `buf` (no copy); other types are decoded into a new array.
 */
export function parseIdx(buf: Uint8Array, name = 'IDX data'): IdxArray {
  if (buf.length < 4) throw new IdxFormatError(`${name}: ${buf.length} bytes, too short for the 4-byte magic number`);
  if (buf[0] !== 0 || buf[1] !== 0) {
    throw new IdxFormatError(
      `${name}: magic number must start with two zero bytes, got 0x${hex(buf[0])}${hex(buf[1])}`,
    );
  }
  const code = buf[2];
  const type = IDX_TYPES.find((t) => t.code === code);
  if (!type) throw new IdxFormatError(`${name}: unknown type code 0x${hex(code)}`);
  const ndim = buf[3];
  if (ndim === 0) throw new IdxFormatError(`${name}: zero dimensions`);
  const headerBytes = 4 + 4 * ndim;
  if (buf.length < headerBytes) {
    throw new IdxFormatError(
      `${name}: ${buf.length} bytes, shorter than the ${headerBytes}-byte header of ${ndim} dimensions`,
    );
  }
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const shape: number[] = [];
  for (let d = 0; d < ndim; d++) shape.push(view.getUint32(4 + 4 * d, false));
  const count = shape.reduce((a, b) => a * b, 1);
  const dataBytes = count * type.bytes;
  if (!Number.isSafeInteger(dataBytes) || headerBytes + dataBytes !== buf.length) {
    throw new IdxFormatError(
      `${name}: dims [${shape}] of ${type.dtype} need ${headerBytes + dataBytes} bytes, the file has ${buf.length}`,
    );
  }
  return { dtype: type.dtype, shape, data: decode(view, headerBytes, count, type) };
}

function decode(view: DataView, offset: number, count: number, type: (typeof IDX_TYPES)[number]): IdxArray['data'] {
  const bytes = new Uint8Array(view.buffer, view.byteOffset + offset, count * type.bytes);
  switch (type.dtype) {
    case 'uint8':
      return bytes;
    case 'int8':
      return new Int8Array(bytes.buffer, bytes.byteOffset, count);
    case 'int16':
      return Int16Array.from({ length: count }, (_, i) => view.getInt16(offset + 2 * i, false));
    case 'int32':
      return Int32Array.from({ length: count }, (_, i) => view.getInt32(offset + 4 * i, false));
    case 'float32':
      return Float32Array.from({ length: count }, (_, i) => view.getFloat32(offset + 4 * i, false));
    case 'float64':
      return Float64Array.from({ length: count }, (_, i) => view.getFloat64(offset + 8 * i, false));
  }
}

function hex(b: number): string {
  return b.toString(16).padStart(2, '0');
}

import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SafetensorsError, saveSafetensors, saveSafetensorsSync, serializeSafetensors } from './safetensors.js';
import { loadSafetensors, parseSafetensors } from './safetensors-read.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ddp-nn-st-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const sample = {
  'layer.weight': { dtype: 'float32' as const, shape: [2, 3], data: Float32Array.of(1, 2, 3, 4, 5, 6) },
  steps: { dtype: 'int32' as const, shape: [], data: Int32Array.of(7) },
  half: { dtype: 'float16' as const, shape: [3], data: Uint16Array.of(0x3c00, 0x7c00, 0x0001) },
  wide: { dtype: 'float64' as const, shape: [1, 1], data: Float64Array.of(Math.PI) },
};

/** `bytes` with its header JSON edited (the data unchanged). */
function rewriteHeader(bytes: Uint8Array, edit: (h: Record<string, Record<string, unknown>>) => void): Uint8Array {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  edit(header);
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + bytes.length - 8 - n);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(bytes.subarray(8 + n), 8 + json.length);
  return out;
}

describe('safetensors', () => {
  it('writes what the specification describes', async () => {
    const path = join(dir, 'a.safetensors');
    await saveSafetensors(path, sample, { format: 'pt' });
    const bytes = new Uint8Array(await readFile(path));
    // Spec: u64 little-endian N, then N bytes of JSON, then the data buffer.
    const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
    expect((8 + n) % 8).toBe(0);
    expect(header.__metadata__).toEqual({ format: 'pt', 'ddp.crc32': expect.any(String) });
    // the CRC-32 of each tensor's bytes (zlib's, as Python's zlib.crc32 computes it), and of the
    // other metadata as compact JSON (zlib.crc32(b'{"format":"pt"}'))
    const crc32s = {
      'layer.weight': '1939e524',
      steps: 'bc93e7a5',
      half: '91e35451',
      wide: 'f2bacb72',
      __metadata__: 'c1f700ee',
    };
    expect(JSON.parse(header.__metadata__['ddp.crc32'])).toEqual(crc32s);
    expect(header['layer.weight']).toEqual({ dtype: 'F32', shape: [2, 3], data_offsets: [0, 24] });
    expect(header.steps).toEqual({ dtype: 'I32', shape: [], data_offsets: [24, 28] });
    expect(header.half).toEqual({ dtype: 'F16', shape: [3], data_offsets: [28, 34] });
    expect(header.wide).toEqual({ dtype: 'F64', shape: [1, 1], data_offsets: [34, 42] });
    expect(bytes.length).toBe(8 + n + 42);
    const data = new DataView(bytes.buffer, bytes.byteOffset + 8 + n);
    expect(data.getFloat32(4 * 5, true)).toBe(6);
    expect(data.getInt32(24, true)).toBe(7);
    expect(data.getUint16(30, true)).toBe(0x7c00);
    expect(data.getFloat64(34, true)).toBe(Math.PI);
    expect((await readdir(dir)).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('round-trips tensors and metadata', async () => {
    const path = join(dir, 'b.safetensors');
    await saveSafetensors(path, sample, { epoch: '3' });
    const { tensors, metadata } = await loadSafetensors(path);
    expect(metadata).toEqual({ epoch: '3' });
    expect([...tensors.keys()]).toEqual(Object.keys(sample));
    for (const [name, t] of Object.entries(sample)) {
      const back = tensors.get(name);
      expect(back?.dtype).toBe(t.dtype);
      expect(back?.shape).toEqual(t.shape);
      expect(back?.data).toEqual(t.data);
    }
  });

  // was: the tensors' bytes copied with `bytes.slice`, a view on a Node Buffer, so each decoded from the start of
  // the file: garbage with every checksum passing (a Buffer from readFileSync, as the CLIP test passes)
  it('parses a Node Buffer and a view at an odd offset of a larger buffer as it parses the bytes alone', async () => {
    const path = join(dir, 'buffer.safetensors');
    await saveSafetensors(path, sample, { epoch: '3' });
    const file = await readFile(path);
    const shifted = new Uint8Array(file.length + 3);
    shifted.set(file, 3);
    for (const bytes of [file, shifted.subarray(3)]) {
      const { tensors, metadata } = parseSafetensors(bytes, path, { requireChecksums: true });
      expect(metadata).toEqual({ epoch: '3' });
      for (const [name, t] of Object.entries(sample)) expect(tensors.get(name)?.data, name).toEqual(t.data);
    }
  });

  it('writes the same bytes from the tensors’ own arrays with saveSafetensorsSync, atomically', async () => {
    const path = join(dir, 'sync.safetensors');
    // views into a larger buffer: the writer must take each view's bytes, not its whole buffer
    const backing = new Float32Array(16).fill(9);
    const view = { dtype: 'float32' as const, shape: [2, 3], data: backing.subarray(5, 11).fill(1.5) };
    const tensors = { ...sample, view };
    saveSafetensorsSync(path, tensors, { epoch: '4' });
    expect(new Uint8Array(await readFile(path))).toEqual(serializeSafetensors(tensors, { epoch: '4' }));
    expect((await loadSafetensors(path)).tensors.get('view')?.data).toEqual(new Float32Array(6).fill(1.5));
    expect((await readdir(dir)).filter((f) => f.startsWith('sync.safetensors.'))).toEqual([]); // no temporary left
    expect(() => saveSafetensorsSync(join(dir, 'missing', 'x.safetensors'), sample)).toThrow(/cannot write/);
  });

  it('gives typed errors for truncated and corrupted files', async () => {
    const bytes = serializeSafetensors(sample);
    const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    const expectKind = (b: Uint8Array, kind: string, message: RegExp) => {
      let caught: unknown;
      try {
        parseSafetensors(b, 'x.safetensors');
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(SafetensorsError);
      expect((caught as SafetensorsError).kind).toBe(kind);
      expect((caught as Error).message).toMatch(message);
    };
    expectKind(bytes.subarray(0, 5), 'truncated', /shorter than the 8-byte/);
    expectKind(bytes.subarray(0, 8 + n - 3), 'truncated', /header says/);
    expectKind(bytes.subarray(0, bytes.length - 1), 'truncated', /tensor 'wide' ends at byte 42/);
    const garbled = bytes.slice();
    garbled[9] = 0x7b; // '{' inside the JSON
    expectKind(garbled, 'corrupt', /not valid UTF-8 JSON/);
    const hugeHeader = bytes.slice();
    new DataView(hugeHeader.buffer).setBigUint64(0, 1n << 40n, true);
    expectKind(hugeHeader, 'corrupt', /implausible/);
    const withExtra = new Uint8Array(bytes.length + 4);
    withExtra.set(bytes);
    expectKind(withExtra, 'corrupt', /trailing bytes/);
    const rewrite = (edit: (h: Record<string, Record<string, unknown>>) => void) => rewriteHeader(bytes, edit);
    expectKind(
      rewrite((h) => {
        (h.steps as Record<string, unknown>).data_offsets = [20, 24];
      }),
      'corrupt',
      /spans|overlap/,
    );
    expectKind(
      rewrite((h) => {
        (h.steps as Record<string, unknown>).shape = [2];
      }),
      'corrupt',
      /spans 4 bytes/,
    );
    expectKind(
      rewrite((h) => {
        (h.steps as Record<string, unknown>).dtype = 'I8';
      }),
      'unsupported',
      /dtype I8/,
    );
    expectKind(
      rewrite((h) => {
        (h.steps as Record<string, unknown>).dtype = 'I64';
      }),
      'corrupt',
      /spans 4 bytes, shape \[\] of I64 needs 8/,
    );
    const file = join(dir, 'cut.safetensors');
    await writeFile(file, bytes.subarray(0, 20));
    await expect(loadSafetensors(file)).rejects.toThrow(/cut\.safetensors.*header says/);
  });

  it('requireChecksums: every single-bit flip of the header is an error (was: metadata such as a step count changed)', () => {
    const bytes = serializeSafetensors(sample, { scalars: '{"0":{"step":5}}' });
    const headerEnd = 8 + Number(new DataView(bytes.buffer).getBigUint64(0, true));
    const loaded: string[] = [];
    for (let at = 0; at < headerEnd; at++) {
      for (const bit of [0x01, 0x02, 0x04, 0x10]) {
        const flipped = bytes.slice();
        flipped[at] ^= bit;
        try {
          parseSafetensors(flipped, 'x.safetensors', { requireChecksums: true });
          loaded.push(`byte ${at} ('${String.fromCharCode(bytes[at])}') ^ ${bit}`);
        } catch (error) {
          if (!(error instanceof SafetensorsError)) loaded.push(`byte ${at}: ${error}`);
        }
      }
    }
    expect(loaded).toEqual([]);
    // a file written elsewhere (no checksums) loads unless they are required
    const plain = rewriteHeader(bytes, (h) => {
      h.__metadata__ = { format: 'pt' };
    });
    expect(parseSafetensors(plain).metadata).toEqual({ format: 'pt' });
    expect(() => parseSafetensors(plain, 'x.safetensors', { requireChecksums: true })).toThrow(/no checksums/);
  });

  it("reads PyTorch's int64 buffers as int32, refusing values that do not fit", () => {
    const header = new TextEncoder().encode(
      JSON.stringify({ num_batches_tracked: { dtype: 'I64', shape: [], data_offsets: [0, 8] } }),
    );
    const file = (value: bigint) => {
      const out = new Uint8Array(8 + header.length + 8);
      const view = new DataView(out.buffer);
      view.setBigUint64(0, BigInt(header.length), true);
      out.set(header, 8);
      view.setBigInt64(8 + header.length, value, true);
      return out;
    };
    const t = parseSafetensors(file(42n)).tensors.get('num_batches_tracked');
    expect(t).toEqual({ dtype: 'int32', shape: [], data: Int32Array.of(42) });
    expect(() => parseSafetensors(file(1n << 40n))).toThrow(/does not fit int32/);
  });

  it('rejects tensors whose data does not match', () => {
    expect(() => serializeSafetensors({ a: { dtype: 'float32', shape: [3], data: new Float32Array(2) } })).toThrow(
      SafetensorsError,
    );
    expect(() => serializeSafetensors({ a: { dtype: 'float16', shape: [1], data: new Float32Array(1) } })).toThrow(
      /typed array/,
    );
    // a stateDict()'s values: was "dtype float32 needs its own typed array, got Function"
    const weight = tf.ones([2]);
    expect(() => serializeSafetensors({ w: weight as never })).toThrow(
      "tensor 'w' is a tf.Tensor; give { dtype, shape, data } (toSafeTensor(t) makes one)",
    );
    weight.dispose();
  });

  it('names such as __proto__ and constructor round-trip (was: a header without them, a file nobody could read)', () => {
    const names = ['__proto__', 'constructor', 'w'];
    const bytes = serializeSafetensors(
      new Map(names.map((n, i) => [n, { dtype: 'float32' as const, shape: [1], data: Float32Array.of(i) }])),
    );
    const { tensors } = parseSafetensors(bytes, 'named', { requireChecksums: true });
    expect(names.map((n) => tensors.get(n)?.data[0])).toEqual([0, 1, 2]);
  });

  it('an empty tensor at the offset where another starts is valid in either order of the header', () => {
    // before: sorted by begin only, `w` listed before the empty `e` was "e starts at 0, expected 8"
    const header = JSON.stringify({
      w: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
      e: { dtype: 'F32', shape: [0], data_offsets: [0, 0] },
    });
    const bytes = new Uint8Array(8 + header.length + 8);
    new DataView(bytes.buffer).setBigUint64(0, BigInt(header.length), true);
    bytes.set(new TextEncoder().encode(header), 8);
    const { tensors } = parseSafetensors(bytes);
    expect(tensors.get('e')?.shape).toEqual([0]);
    expect(tensors.get('w')?.shape).toEqual([2]);
  });
});

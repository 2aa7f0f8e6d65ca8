import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, roundBitsToHalf, roundToPrecision, setBackend, tf, useNativeKernels } from './index.js';

/** PyTorch 1.13's x.to(dtype).float() (fixtures/make_round_half_fixture.py). */
const fixture = JSON.parse(readFileSync(new URL('./fixtures/round_half.json', import.meta.url), 'utf8')) as {
  low: number[];
  hashedCount: number;
  named: Record<string, { in: number; bfloat16: number; float16: number }>;
  sha256: Record<'bfloat16' | 'float16', { structured: string; hashed: string }>;
};
const DTYPES = ['bfloat16', 'float16'] as const;

/** The fixture's inputs: every top half with its bottom halves, and i·2654435761 mod 2^32. */
const inputs = {
  structured: Uint32Array.from({ length: 65536 * fixture.low.length }, (_, i) => {
    const low = fixture.low[i % fixture.low.length];
    return ((Math.floor(i / fixture.low.length) << 16) | low) >>> 0;
  }),
  hashed: Uint32Array.from({ length: fixture.hashedCount }, (_, i) => Math.imul(i, 2654435761) >>> 0),
};

const sha256 = (bits: Uint32Array) => createHash('sha256').update(bits).digest('hex');

/** roundToPrecision's output bits for these input bits. */
function rounded(bits: Uint32Array, dtype: 'bfloat16' | 'float16'): Uint32Array {
  const x = tf.tensor(new Float32Array(bits.buffer.slice(0)), [bits.length], 'float32');
  const y = roundToPrecision(x, dtype);
  const out = new Uint32Array((y.dataSync() as Float32Array).slice().buffer);
  tf.dispose([x, y]);
  return out;
}

const initial = getBackend();
const native = useNativeKernels(true);
afterAll(async () => {
  useNativeKernels(true);
  await setBackend(initial as 'wasm');
});

const paths: [string, () => Promise<void>, boolean][] = [
  ['the native kernel', async () => void useNativeKernels(true), native],
  ["the host loop (DDP_NATIVE=0's path)", async () => void useNativeKernels(false), true],
  ["the host loop on tfjs's cpu backend", () => setBackend('cpu'), true],
];

describe.each(paths)('roundToPrecision through %s', (_path, select, available) => {
  it.skipIf(!available).each(DTYPES)(
    "%s: the bits of torch's x.to(dtype).float() on 1.77 M patterns (ties, subnormals, overflow, NaN payloads)",
    async (dtype) => {
      await setBackend('wasm');
      await select();
      const tensors = tf.memory().numTensors;
      for (const [name, { in: bits, ...want }] of Object.entries(fixture.named)) {
        expect([name, rounded(Uint32Array.of(bits), dtype)[0]]).toEqual([name, want[dtype]]);
      }
      expect(sha256(rounded(inputs.structured, dtype))).toBe(fixture.sha256[dtype].structured);
      expect(sha256(rounded(inputs.hashed, dtype))).toBe(fixture.sha256[dtype].hashed);
      expect(tf.memory().numTensors).toBe(tensors);
    },
  );
});

describe('roundBitsToHalf', () => {
  it.each(DTYPES)('%s: the named values of the fixture', (dtype) => {
    for (const [name, { in: bits, ...want }] of Object.entries(fixture.named)) {
      expect([name, roundBitsToHalf(bits, dtype)]).toEqual([name, want[dtype]]);
    }
  });

  it("is not float32's identity: the comparison sees a rounding", () => {
    expect(roundBitsToHalf(0x3f800001, 'bfloat16')).toBe(0x3f800000);
    expect(roundBitsToHalf(0x3f800001, 'float16')).toBe(0x3f800000);
  });
});

import type { ParamState } from '@ddp/nn';
import { tf } from '@ddp/tensor';

type EntryMeta = Record<string, number | { shape: number[]; offset: number }>;

/**
 * One rank's optimizer state as two arrays a collective can move: JSON metadata (scalars,
 * tensor shapes and offsets, by global parameter index) as bytes, and every state tensor's
 * values back to back. float32 carries int32 state exactly up to 2^24.
 */
export function packState(entries: [number, ParamState][]): { meta: Int32Array; values: Float32Array } {
  const meta: Record<number, EntryMeta> = {};
  const chunks: Float32Array[] = [];
  let offset = 0;
  for (const [index, state] of entries) {
    const m: EntryMeta = {};
    for (const [key, v] of Object.entries(state)) {
      if (typeof v === 'number') m[key] = v;
      else {
        const data = Float32Array.from(v.dataSync());
        m[key] = { shape: [...v.shape], offset };
        chunks.push(data);
        offset += data.length;
      }
    }
    meta[index] = m;
  }
  const values = new Float32Array(offset);
  let at = 0;
  for (const c of chunks) {
    values.set(c, at);
    at += c.length;
  }
  return { meta: Int32Array.from(new TextEncoder().encode(JSON.stringify(meta))), values };
}

/** The inverse of packState: new tensors (the caller owns them), by global parameter index. */
export function unpackState(meta: Int32Array, values: Float32Array): Map<number, ParamState> {
  const parsed = JSON.parse(new TextDecoder().decode(Uint8Array.from(meta))) as Record<string, EntryMeta>;
  const out = new Map<number, ParamState>();
  for (const [index, m] of Object.entries(parsed)) {
    const state: ParamState = {};
    for (const [key, v] of Object.entries(m)) {
      if (typeof v === 'number') state[key] = v;
      else {
        const n = v.shape.reduce((a, b) => a * b, 1);
        state[key] = tf.tensor(values.slice(v.offset, v.offset + n), v.shape, 'float32');
      }
    }
    out.set(Number(index), state);
  }
  return out;
}

/** Splits `count` items into `parts` contiguous chunks whose sizes differ by at most one. */
export function chunkBounds(count: number, parts: number): number[] {
  const base = Math.floor(count / parts);
  const extra = count % parts;
  const bounds = [0];
  for (let i = 0; i < parts; i++) bounds.push(bounds[i] + base + (i < extra ? 1 : 0));
  return bounds;
}

/** Chunk bounds from per-rank sizes (prefix sums). */
export function boundsFromSizes(sizes: readonly number[]): number[] {
  const bounds = [0];
  for (const s of sizes) bounds.push(bounds[bounds.length - 1] + s);
  return bounds;
}

/** [start, end) pieces of at most `seg` items covering [start, end). */
export function segments(start: number, end: number, seg: number): [number, number][] {
  const out: [number, number][] = [];
  for (let s = start; s < end; s += seg) out.push([s, Math.min(end, s + seg)]);
  return out;
}

export const mod = (a: number, n: number): number => ((a % n) + n) % n;

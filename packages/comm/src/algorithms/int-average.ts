/**
 * int32 AVG as a float64 SUM: int32 sums leave int32 (3 ranks of 2^30 wrap), float64 holds
 * every sum of int32 values exactly below 2^53 (2^22 ranks), so the members sum in float64
 * and each truncates the quotient toward zero (C's integer division, as PyTorch's gloo does).
 * Every backend goes through these two (op-dispatcher.ts, mpi-calls.ts), so no algorithm
 * ever averages int32.
 */
export function widenInt32(input: Int32Array, into: Float64Array = new Float64Array(input.length)): Float64Array {
  into.set(input);
  return into;
}

/** out[i] = trunc(sum[offset + i] / size). */
export function truncatedAverageInto(sum: Float64Array, size: number, out: Int32Array, offset = 0): void {
  for (let i = 0; i < out.length; i++) out[i] = Math.trunc(sum[offset + i] / size);
}

import { bfloatToFloat, floatToBfloat, floatToHalf, halfToFloat } from '@ddp/half';
import type { HalfDtype, NumArray, ReduceOp } from '../dtypes.js';
import type { OpContext } from '../execution/op-context.js';
import { exchange } from './direct.js';
import { narrowHalf, widenHalf } from './half-codec.js';
import { chunkBounds, mod } from './partition.js';
import { finishAverage, reduceInto } from './reduce.js';
import { quiet, ring, ringAllGather, ringAllReduce, type Step } from './ring.js';
import { RingAverage } from './ring-average.js';
import { bytesOf } from './views.js';

/** Every rank's 16-bit words widened and reduced in rank order in float32 (AVG divided), not yet rounded. */
export function combineHalves(inputs: Uint16Array[], dtype: HalfDtype, op: ReduceOp): Float32Array {
  const acc = widenHalf(inputs[0] as Uint16Array, dtype);
  const scratch = new Float32Array(acc.length);
  for (let r = 1; r < inputs.length; r++) reduceInto(acc, widenHalf(inputs[r] as Uint16Array, dtype, scratch), op);
  const toFloat = dtype === 'float16' ? halfToFloat : bfloatToFloat;
  if (op === 'avg') finishAverage(acc, inputs.length, (r, i) => toFloat((inputs[r] as Uint16Array)[i]));
  return acc;
}

/**
 * All-reduce of float16/bfloat16 words that carries 16-bit words on the wire (half the bytes
 * of widening first) and combines in float32.
 * - direct (small): every rank gets every peer's words and reduces the N inputs in rank
 *   order in float32, rounding once;
 * - ring (large): each received segment is widened, combined with this rank's values and
 *   rounded back to 16 bits before it is forwarded, as NCCL does. With two ranks that is
 *   still the float32 result rounded once; with more, partial sums are rounded per hop
 *   (an AVG whose rounded sums overflow is redone as Σ (x_r / N) there: RingAverage).
 */
export async function halfAllReduce(
  ctx: OpContext,
  words: Uint16Array,
  dtype: HalfDtype,
  op: ReduceOp,
  useRing: boolean,
  segBytes: number,
): Promise<void> {
  if (ctx.size === 1) return;
  if (!useRing) {
    const inputs: Uint16Array[] = [];
    await exchange(ctx, bytesOf(words), (p) => {
      inputs[p] = new Uint16Array(words.length);
      return bytesOf(inputs[p]);
    });
    inputs[ctx.rank] = words;
    const acc = combineHalves(inputs, dtype, op);
    // our frames still point into `words` until the kernel has them
    await ctx.flush();
    narrowHalf(acc, dtype, words);
    return;
  }
  const bounds = chunkBounds(words.length, ctx.size);
  const seg = Math.max(1, Math.floor(segBytes / 2));
  const { n, r, right, left, chunkSegs } = ring(ctx, bounds, seg);
  for (const [s, e] of chunkSegs(mod(r - 1, n))) ctx.send(right, bytesOf(words.subarray(s, e)));
  // received segments land in `incoming` at their own offsets (no two steps share a chunk)
  const incoming = new Uint16Array(words.length);
  const steps: (Step<Uint16Array> & { last: boolean })[] = [];
  for (let k = 0; k < n - 1; k++) {
    for (const [s, e] of chunkSegs(mod(r - 2 - k, n))) {
      const into = incoming.subarray(s, e);
      steps.push({
        dst: words.subarray(s, e),
        forward: k < n - 2,
        last: k === n - 2,
        done: quiet(ctx.recvInto(left, bytesOf(into)).then(() => into)),
      });
    }
  }
  // float32 scratch for one segment, reused by every step; sums are rounded into `incoming`
  // and forwarded from there, so this rank's words stay whole until its own chunk is done
  const [accAll, gotAll] = [new Float32Array(seg), new Float32Array(seg)];
  const toFloat = dtype === 'float16' ? halfToFloat : bfloatToFloat;
  const infinity = dtype === 'float16' ? 0x7c00 : 0x7f80;
  const infinite = (w: number) => (w & 0x7fff) === infinity;
  const average = op === 'avg' ? new RingAverage(2, (i) => toFloat(words[i])) : null;
  for (const st of steps) {
    const got = (await st.done) as Uint16Array;
    const acc = widenHalf(st.dst, dtype, accAll.subarray(0, got.length));
    reduceInto(acc, widenHalf(got, dtype, gotAll.subarray(0, got.length)), op);
    if (st.last && op === 'avg') finishAverage(acc, ctx.size);
    narrowHalf(acc, dtype, got);
    if (st.forward) ctx.send(right, bytesOf(got));
    if (!st.last) continue;
    const first = st.dst.byteOffset / 2 - words.byteOffset / 2;
    if (average) for (let k = 0; k < got.length; k++) if (infinite(got[k])) average.note(first + k);
    st.dst.set(got);
  }
  // segments sent above point into `words`: let them leave before all-gather overwrites it
  await ctx.flush();
  const all = bytesOf(words);
  await ringAllGather(
    ctx,
    all,
    bounds.map((b) => b * 2),
    segBytes,
    average?.allGatherHooks(all),
  );
  const narrow = dtype === 'float16' ? floatToHalf : floatToBfloat;
  const allSum = (v: NumArray) => ringAllReduce(ctx, v, 'sum', segBytes);
  await average?.finish(
    ctx,
    (i) => infinite(words[i]),
    Float32Array,
    allSum,
    (i, v) => {
      words[i] = narrow(v);
    },
  );
  await ctx.flush();
}

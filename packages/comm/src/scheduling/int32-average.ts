import { truncatedAverageInto, widenInt32 } from '../algorithms/int-average.js';
import type { Work } from '../api/work.js';
import type { OpDispatcher } from './op-dispatcher.js';
import type { OpRequest } from './protocol.js';

/**
 * int32 AVG (allReduce, reduce, reduceScatter) as a float64 SUM in staging, averaged and
 * truncated when copied out (algorithms/int-average.ts): every algorithm and thread then sums
 * exactly. `output` receives elements [offset, offset + output.length) of the average.
 */
export function int32Average(
  ops: OpDispatcher,
  op: OpRequest['op'],
  input: Int32Array,
  output: Int32Array | null,
  offset: number,
  extra: Partial<OpRequest>,
): Work {
  const n = input.length;
  return ops.submit(
    { op, root: 0, count: n, length: n, ...extra, dtype: 'float64', reduceOp: 'sum' },
    n * Float64Array.BYTES_PER_ELEMENT,
    (sab) => widenInt32(input, new Float64Array(sab, 0, n)),
    (sab) => {
      if (output) truncatedAverageInto(new Float64Array(sab, 0, n), ops.size, output, offset);
    },
    { reads: [input], writes: output ? [output] : [] },
  );
}

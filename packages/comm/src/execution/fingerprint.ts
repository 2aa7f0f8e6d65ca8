import { DTYPE_CODE, DTYPE_NAME, OP_CODE, OP_NAME, type OpName, REDUCE_CODE, REDUCE_NAME } from '../dtypes.js';
import type { OpRequest } from '../scheduling/protocol.js';
import type { Fingerprint } from '../transport/frame.js';

/**
 * A collective's fingerprint (op, dtype, reduce op, count, root, sequence): every frame and
 * shared-memory record of it carries one, and a peer's that differs is a mismatch.
 */

/** A fingerprint as the call it stands for, for error messages. */
export function describe(fp: Fingerprint): string {
  // one code for both ends of a point-to-point transfer (they must match): the message names both
  const op = fp.op === OP_CODE.send ? 'send/recv' : (OP_NAME[fp.op] ?? `op#${fp.op}`);
  const root =
    fp.op === 2 || fp.op === 6 || fp.op === 7 || fp.op === 8
      ? `, root ${fp.root}`
      : fp.op === OP_CODE.send
        ? `, tag ${fp.root}`
        : '';
  const red = fp.reduceOp ? `, ${REDUCE_NAME[fp.reduceOp] ?? fp.reduceOp}` : '';
  return `${op}(${DTYPE_NAME[fp.dtype] ?? `dtype#${fp.dtype}`}, count ${fp.count}${red}${root}, seq ${fp.seq})`;
}

/** The fingerprint of a call. */
export function fingerprintOf(
  req: Pick<OpRequest, 'op' | 'dtype' | 'reduceOp' | 'count' | 'seq' | 'root'>,
): Fingerprint {
  return {
    op: OP_CODE[req.op as OpName],
    dtype: DTYPE_CODE[req.dtype],
    reduceOp:
      req.op === 'allReduce' || req.op === 'reduce' || req.op === 'reduceScatter' ? REDUCE_CODE[req.reduceOp] : 0,
    count: req.count,
    seq: req.seq,
    root: req.root,
  };
}

export function sameFingerprint(a: Fingerprint, b: Fingerprint): boolean {
  return (
    a.op === b.op &&
    a.dtype === b.dtype &&
    a.reduceOp === b.reduceOp &&
    a.count === b.count &&
    a.seq === b.seq &&
    a.root === b.root
  );
}

import { type ProcessGroup, sharedArray } from '@ddp/comm';
import type { CommHook, GradBucket } from './comm-hooks.js';
import { DDPError } from './errors.js';

/** Adasum was asked of a group whose size is not a power of two (raised on every rank alike). */
export class AdasumError extends DDPError {
  override name = 'AdasumError';
}

/** A stretch of a flat buffer combined on its own (Horovod's Adasum works per layer: per parameter here). */
export interface Segment {
  offset: number;
  size: number;
}

/**
 * Refuses segments that do not tile the buffer (in any order: DDP's buckets list their members first
 * to last, their small gradients packed first): a gap kept each rank's own values, an overlap read a
 * pair already combined in place (ranks disagreed), one past the end made NaN, all silently.
 */
function checkSegments(segments: readonly Segment[], length: number, where: string): void {
  const byOffset = [...segments].sort((a, b) => (a?.offset ?? 0) - (b?.offset ?? 0));
  let end = 0;
  for (const s of byOffset) {
    if (s?.offset !== end || !Number.isInteger(s.size) || s.size < 0) {
      throw new AdasumError(
        `${where}: segments must tile the buffer (each element in one segment); ` +
          `segment ${segments.indexOf(s)} is ${JSON.stringify(s)}, where offset ${end} was expected`,
      );
    }
    end += s.size;
  }
  if (end !== length)
    throw new AdasumError(`${where}: segments must tile the buffer; they cover ${end} of its ${length} elements`);
}

/**
 * Horovod's Adasum of two gradients, per segment: (1 − a·b / 2|a|²) a + (1 − a·b / 2|b|²) b.
 * Orthogonal gradients add up, equal ones average, opposite ones cancel less than a sum would.
 * Dot products in float64; as Horovod's, a vector of squared norm below 1e-8 keeps coefficient 1
 * (a pair of such small vectors adds up).
 */
export function adasumPair(
  a: Float32Array,
  b: Float32Array,
  out: Float32Array,
  segments: readonly Segment[] = [{ offset: 0, size: a.length }],
): void {
  if (b.length !== a.length || out.length !== a.length)
    throw new AdasumError(`adasumPair: a, b and out must have one length, got ${a.length}, ${b.length}, ${out.length}`);
  checkSegments(segments, a.length, 'adasumPair');
  combine(a, b, out, segments);
}

/** adasumPair on checked arguments (adasumAllReduce checks its segments once, not at every level). */
function combine(a: Float32Array, b: Float32Array, out: Float32Array, segments: readonly Segment[]): void {
  for (const { offset, size } of segments) {
    let dot = 0;
    let aa = 0;
    let bb = 0;
    for (let i = offset; i < offset + size; i++) {
      const x = a[i];
      const y = b[i];
      dot += x * y;
      aa += x * x;
      bb += y * y;
    }
    const ca = aa >= 1e-8 ? 1 - dot / (2 * aa) : 1;
    const cb = bb >= 1e-8 ? 1 - dot / (2 * bb) : 1;
    for (let i = offset; i < offset + size; i++) out[i] = ca * a[i] + cb * b[i];
  }
}

/** Refuses a group Adasum cannot combine over (every rank alike: the size is the same everywhere). */
export function checkAdasumGroup({ size, rank }: ProcessGroup): void {
  if (size & (size - 1)) {
    throw new AdasumError(
      `Adasum (rank ${rank} of ${size}): needs a power-of-two group size, got ${size}; use the averaging all-reduce`,
    );
  }
}

const partnerBuffers = new WeakMap<Float32Array, Float32Array>();

/**
 * Adasum over the group, in place: at level k each rank exchanges its running result with
 * rank XOR 2^k and combines the pair, the lower rank's vector first, so partners compute the
 * same bits; after log2(size) levels every rank holds the binary tree's
 * Adasum(Adasum(g0, g1), Adasum(g2, g3)), … (Horovod's recursive combination). Needs a
 * power-of-two group; `buf` must be a SharedArrayBuffer view (the comm thread sends from it).
 */
export async function adasumAllReduce(
  buf: Float32Array,
  group: ProcessGroup,
  segments?: readonly Segment[],
): Promise<Float32Array> {
  checkAdasumGroup(group);
  if (segments) checkSegments(segments, buf.length, `adasumAllReduce (rank ${group.rank})`);
  const whole = segments ?? [{ offset: 0, size: buf.length }];
  const { size, rank } = group;
  let theirs = partnerBuffers.get(buf);
  if (theirs === undefined) {
    theirs = sharedArray(Float32Array, buf.length);
    partnerBuffers.set(buf, theirs);
  }
  for (let distance = 1; distance < size; distance *= 2) {
    const peer = rank ^ distance;
    await group
      .batchIsendIrecv([
        { op: 'isend', buf, peer },
        { op: 'irecv', buf: theirs, peer },
      ])
      .wait();
    if (rank < peer) combine(buf, theirs, buf, whole);
    else combine(theirs, buf, buf, whole);
  }
  return buf;
}

/** The Adasum hook's state: hooks run one after another, so every rank exchanges buckets in the same order. */
export class AdasumState {
  private tail: Promise<unknown> = Promise.resolve();

  /** Runs fn after every bucket queued before it. */
  enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn);
    this.tail = run.catch(() => {});
    return run;
  }
}

/**
 * DDP comm hook combining each bucket's gradients with Adasum (per parameter) instead of
 * averaging them: `ddp.registerCommHook(new AdasumState(), adasumHook)`. Power-of-two worlds.
 */
export const adasumHook: CommHook<AdasumState> = (state, bucket: GradBucket) => {
  const segments = bucket.parameters.map(({ offset, size }) => ({ offset, size }));
  return state.enqueue(() => adasumAllReduce(bucket.buffer, bucket.processGroup, segments));
};

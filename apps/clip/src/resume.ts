/**
 * A resumed run must see the batches the interrupted one would have seen next. The seed, the
 * global batch and the accumulation fix that stream (batches.ts); resumed under other values, the
 * run would silently train on other samples (some twice, some never in the epoch). The world size
 * may change: batches are global.
 */

/** The options that fix the data stream, saved in the checkpoint's `extra.stream`. */
export interface DataStream {
  seed: number;
  batchSize: number;
  gradAccum: number;
}

const FLAGS: Record<keyof DataStream, string> = {
  seed: '--seed',
  batchSize: '--batch-size',
  gradAccum: '--grad-accum',
};

/** A checkpoint resumed under options that would change the run it continues. */
export class ResumeError extends Error {
  override name = 'ResumeError';
}

/**
 * The stream a checkpoint's `extra` records: `stream`, or only `seed` in checkpoints written before
 * `stream` was saved.
 */
export function savedStream(extra: unknown): Partial<DataStream> {
  const e = (extra ?? {}) as { stream?: DataStream; seed?: number };
  return e.stream ?? (e.seed === undefined ? {} : { seed: e.seed });
}

/** Throws ResumeError naming every option whose value differs from the one the checkpoint was written with. */
export function checkSameStream(saved: Partial<DataStream>, current: DataStream, path: string, rank: number): void {
  const differ = (Object.keys(FLAGS) as (keyof DataStream)[]).filter(
    (k) => saved[k] !== undefined && saved[k] !== current[k],
  );
  if (differ.length === 0) return;
  const was = differ.map((k) => `${FLAGS[k]} ${saved[k]}`).join(' ');
  const now = differ.map((k) => `${FLAGS[k]} ${current[k]}`).join(' ');
  throw new ResumeError(
    `rank ${rank}: ${path} was written by a run with ${was}, this one has ${now}: its batches would differ ` +
      `from the run it continues. Resume with ${was}, or start a new --checkpoint-dir.`,
  );
}

import { DataArgumentError } from './errors.js';

/** One-shot sources (iterators) a pass has begun over. */
const consumed = new WeakSet<object>();

/**
 * Call before each pass (epoch) over `source`. A one-shot iterator — a generator object, anything
 * with its own next() — yields its items once: a second epoch over it would have no batches,
 * silently (and the loader closes it after each pass anyway), so that second pass raises.
 */
export function startPass(source: object, what: string): void {
  if (typeof (source as { next?: unknown }).next !== 'function') return;
  if (consumed.has(source)) {
    throw new DataArgumentError(
      `${what}: the stream is a one-shot iterator (a generator object?) that an earlier pass consumed, ` +
        'so this epoch would be empty; give an iterable that starts anew on each pass, such as ' +
        'new GeneratorDataset(() => makeStream())',
    );
  }
  consumed.add(source);
}

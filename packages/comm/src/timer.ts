/**
 * Timers for user-given timeouts. Node fires a setTimeout of 2^31 ms or more (about 24.8 days,
 * Infinity included) after 1 ms, so a longer timeout is chained in steps under that cap, and
 * Infinity (allowed by checkTimeout) arms no timer at all.
 */
const MAX_DELAY_MS = 2 ** 31 - 1;

/** Calls `fn` once `ms` milliseconds have passed (never for Infinity); returns what cancels it. */
export function startTimer(fn: () => void, ms: number): () => void {
  if (ms === Number.POSITIVE_INFINITY) return () => {};
  const due = Date.now() + ms;
  let timer: NodeJS.Timeout;
  const arm = () => {
    const left = due - Date.now();
    timer = left > MAX_DELAY_MS ? setTimeout(arm, MAX_DELAY_MS) : setTimeout(fn, Math.max(0, left));
  };
  arm();
  return () => clearTimeout(timer);
}

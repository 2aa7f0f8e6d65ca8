/**
 * Handle on an issued collective (PyTorch's Work): `await work`, `await work.wait()` or `await
 * work.promise` all wait for it. A Work is thenable because `await group.allReduce(buf)` is how
 * JavaScript reads torch's blocking `dist.all_reduce(t)`: before, it returned at once and the
 * buffer still held this rank's own values, silently (probe BD).
 */
export interface Work<T = void> extends PromiseLike<T> {
  readonly promise: Promise<T>;
  wait(): Promise<T>;
}

export function makeWork<T>(promise: Promise<T>): Work<T> {
  // a Work nobody waits on must not crash the process with an unhandled rejection
  promise.catch(() => {});
  // biome-ignore lint/suspicious/noThenProperty: thenable on purpose, so `await work` waits (see Work)
  return { promise, wait: () => promise, then: (onDone, onFailed) => promise.then(onDone, onFailed) };
}

/** Handle on an issued collective (PyTorch's Work): await `promise` or call wait(). */
export interface Work<T = void> {
  readonly promise: Promise<T>;
  wait(): Promise<T>;
}

export function makeWork<T>(promise: Promise<T>): Work<T> {
  // a Work nobody waits on must not crash the process with an unhandled rejection
  promise.catch(() => {});
  return { promise, wait: () => promise };
}

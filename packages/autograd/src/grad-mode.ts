let gradEnabled = true;

/** Whether ops record a graph for tensors that require grad (false inside noGrad). */
export function isGradEnabled(): boolean {
  return gradEnabled;
}

function withGradMode<T>(enabled: boolean, fn: () => T): T {
  const previous = gradEnabled;
  gradEnabled = enabled;
  let result: T;
  try {
    result = fn();
  } catch (err) {
    gradEnabled = previous;
    throw err;
  }
  if (result instanceof Promise) {
    // async body: keep the mode until it settles (do not interleave other grad-mode work meanwhile)
    return result.finally(() => {
      gradEnabled = previous;
    }) as T;
  }
  gradEnabled = previous;
  return result;
}

/** Runs fn without recording a graph, like `with torch.no_grad():`. fn may be async. */
export function noGrad<T>(fn: () => T): T {
  return withGradMode(false, fn);
}

/** Runs fn with graph recording on, even inside noGrad. fn may be async. */
export function enableGrad<T>(fn: () => T): T {
  return withGradMode(true, fn);
}

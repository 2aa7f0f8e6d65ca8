import { AsyncLocalStorage } from 'node:async_hooks';

// Async-context local, so an async noGrad body (an evaluation awaiting data) does not switch
// recording off for other flows running meanwhile (a training step, a simulated rank).
const gradMode = new AsyncLocalStorage<boolean>();

/** Whether ops record a graph for tensors that require grad (false inside noGrad). */
export function isGradEnabled(): boolean {
  return gradMode.getStore() ?? true;
}

/** Runs fn without recording a graph, like `with torch.no_grad():`. fn may be async. */
export function noGrad<T>(fn: () => T): T {
  return gradMode.run(false, fn);
}

/** Runs fn with graph recording on, even inside noGrad. fn may be async. */
export function enableGrad<T>(fn: () => T): T {
  return gradMode.run(true, fn);
}

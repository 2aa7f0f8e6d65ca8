import type { Tensor } from './tensor.js';

/**
 * What is wrong with the first freed tensor of `params`, or null when none is. A freed parameter has no
 * gradient, so an optimizer, a clip or a scaler would skip it silently: its layer was replaced after the
 * list was taken (applyTensorParallel, a dispose), or FSDP freed it while resharded (its reason names the
 * shards to use). `which` names a position; `since` says when the list was taken. Callers throw their own
 * typed error with it.
 */
export function freedParameterProblem(
  params: readonly Tensor[],
  since: string,
  which: (i: number) => string = (i) => `parameter ${i}`,
): string | null {
  const i = params.findIndex((p) => p.isDisposed);
  if (i < 0) return null;
  const freed = params[i].freedBy;
  if (freed !== null && freed !== 'dispose()') return `${which(i)} is freed: ${freed}`;
  return (
    `${which(i)} was disposed (its layer replaced or disposed after ${since}): ` +
    'take model.parameters() after changing the model'
  );
}

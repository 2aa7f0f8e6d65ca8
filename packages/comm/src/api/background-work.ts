/** Background work that still needs the process groups (an async checkpoint's commit). */
const finishBeforeDestroy = new Set<Promise<void>>();
/** Of that work, the failures nobody has seen yet (each check returns one, or null). */
const unreportedFailures = new Set<() => unknown>();

/**
 * destroyProcessGroup waits for `work` to settle before tearing the groups down: a script that
 * ends right after an async save would otherwise cut the save's collectives and lose it. With
 * `unreported`, destroyProcessGroup then raises what it returns (a failure no one has raised
 * yet): the last async save of a script that exits after it failed with exit code 0, silently.
 */
export function finishBeforeDestroyingGroups(work: Promise<unknown>, unreported?: () => unknown): void {
  const settled = work.then(
    () => {},
    () => {},
  );
  finishBeforeDestroy.add(settled);
  if (unreported) unreportedFailures.add(unreported);
  void settled.then(() => {
    finishBeforeDestroy.delete(settled);
    if (unreported && unreported() == null) unreportedFailures.delete(unreported);
  });
}

/** Waits for the registered work (and work it registers meanwhile); returns a failure no one has raised, or null. */
export async function settleBackgroundWork(): Promise<unknown> {
  while (finishBeforeDestroy.size > 0) await Promise.all(finishBeforeDestroy);
  const failure = [...unreportedFailures].map((check) => check()).find((error) => error != null);
  unreportedFailures.clear();
  return failure ?? null;
}

/** PowerSGD's warnings (the states it cannot carry on from, said once each) and the state's one owner. */
import { loadedSaveOf, type Module } from '@ddp/nn';
import { DDPUsageError } from './errors.js';
import { PowerSGDState } from './powersgd.js';

let warnedNotFinite = false;
/**
 * A non-finite gradient stays in the error feedback (torch's too): every later result is non-finite, and
 * under GradScaler every later step is skipped while the scale falls to 0 (probe BL). Said once.
 */
export function warnErrorNotFinite(): void {
  if (warnedNotFinite) return;
  warnedNotFinite = true;
  process.emitWarning(
    "PowerSGD's error feedback holds a non-finite value (a gradient overflowed): every later gradient will be " +
      'non-finite, and under GradScaler every later step skipped. Use useErrorFeedback: false with loss scaling, ' +
      'or a fresh PowerSGDState',
    { code: 'DDP_POWERSGD_ERROR_NOT_FINITE' },
  );
}

/**
 * A fresh PowerSGDState over a module loaded from a checkpoint: its iteration count, error feedback
 * and warm-start Q are not in the model's checkpoint but in each rank's savePowerSGDState file, so a
 * resumed run that did not load them starts compression over (plain all-reduce for startPowerSGDIter
 * steps, no error carried) and ends on other weights than an uninterrupted one (probe AU: 7.5e-3
 * after 3 + 3 steps). Said once, not silent.
 */
function warnIfPowerSGDRestarts(state: unknown, module: Module): void {
  const loaded = loadedSaveOf(module);
  if (!(state instanceof PowerSGDState) || state.iter > 0 || state.restored || loaded === null) return;
  process.emitWarning(
    `PowerSGD starts afresh over a module loaded from ${loaded.path}: its state (iteration, error feedback, ` +
      'warm-start Q) was not loaded (loadPowerSGDState, before registerCommHook), so the resumed run differs ' +
      'from an uninterrupted one',
    { code: 'DDP_POWERSGD_NOT_RESUMED' },
  );
}

const owners = new WeakMap<PowerSGDState, object>();

/**
 * One PowerSGDState per DDP model: its error feedback and Q are kept by parameter index, so a second
 * model's gradients took the first's (and counted its iterations twice), silently for like models, a
 * RangeError for others (probe BP; torch's state, kept by bucket, mixes alike).
 */
function claimPowerSGDState(state: unknown, owner: object): void {
  if (!(state instanceof PowerSGDState)) return;
  if ((owners.get(state) ?? owner) !== owner)
    throw new DDPUsageError(
      'registerCommHook: this PowerSGDState already serves another DistributedDataParallel: give each model ' +
        'a state of its own (its error feedback and Q are kept per parameter of one model)',
    );
  owners.set(state, owner);
}

/** What registerCommHook checks of a hook's state: one owner for a PowerSGDState, and a resume that restores it. */
export function admitPowerSGDState(state: unknown, owner: object, module: Module): void {
  claimPowerSGDState(state, owner);
  warnIfPowerSGDRestarts(state, module);
}

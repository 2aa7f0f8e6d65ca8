import { claimGradientReduction, releaseGradientReduction } from '@ddp/autograd';
import type { Parameter } from '@ddp/nn';
import { DDPUsageError } from './errors.js';

/**
 * Takes `params` for the wrapper `owner`, or refuses those another live wrapper (DDP,
 * DataParallelNaive, ZeRO stage 2) reduces: both wrappers' hooks reduced the same gradient, and
 * the averages came out wrong on every rank alike (@ddp/autograd's registry, shared with ZeRO).
 */
export function claimParameters(owner: object, params: readonly { name: string; param: Parameter }[], who: string) {
  claimGradientReduction(owner, params, who, (message) => new DDPUsageError(message));
}

/** Gives `owner`'s parameters back (dispose). */
export const releaseParameters = releaseGradientReduction;

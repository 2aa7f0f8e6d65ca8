/** `pnpm bench ddp`'s worlds: how each is started, and how rounds of them are run and kept. */
import type { TwoHosts } from '@ddp/netns';
import { runSampleWorld } from './world.js';

export interface Sample {
  variant: string;
  world: number;
  ms: number;
}

/** Step times (ms) by mode, CPU times as `cpu:<mode>`, and `info:<what>` figures that are not times. */
export type StepTimes = Record<string, number>;

/** Runs `world` processes of cmd/args with the torchrun environment; resolves with rank 0's step times by variant. */
export async function runWorld(
  world: number,
  cmd: string,
  args: string[],
  hosts?: TwoHosts,
  env: Record<string, string> = {},
): Promise<StepTimes> {
  const where = hosts ? { masterAddr: hosts.addr[0], wrap: (rank: number) => hosts.exec(rank) } : {};
  const [sample] = (
    await runSampleWorld<StepTimes>(world, cmd, args, { env: { OMP_NUM_THREADS: '1', ...env }, ...where })
  ).flat();
  if (!sample) throw new Error(`no SAMPLE from ${cmd} ${args.join(' ')}`);
  return sample;
}

/**
 * How a world runs besides its variant: over Unix sockets instead of shared memory ('uds'), or
 * with the ranks leaving a core free ('free-core': every rank's main thread pinned to CPU 0,
 * its other threads, the comm thread among them, to CPU 1 — what one rank per two cores gives
 * the comm thread, on a 2-core machine).
 */
export type Setting = 'uds' | 'free-core';
export const SETTING_ENV: Record<Setting, Record<string, string>> = {
  uds: { DDP_TRANSPORT: 'uds' },
  'free-core': { DDP_BENCH_FREE_CORE: '1' },
};
/** One world of the plan: a variant at a world size, and how it runs (default: shared memory, all cores shared). */
export type Entry = [variant: string, world: number, setting?: Setting];
/** Every round's step times of the interleaved run (compute, local, comm, ddp in one process), by world and setting. */
export type InterleavedRounds = Record<number, Record<string, StepTimes[]>>;
/** Figures that are not step times (`info:*`), by name and world, every round's. */
export type Infos = { variant: string; world: number; value: number }[];

/**
 * Runs every entry of the plan `rounds` times, alternating; keeps each step time's best round
 * in `samples` and every `info:*` figure in `infos`; returns every round's step times of the
 * interleaved run, by world size and setting ('' for the default).
 */
export async function measure(
  plan: Entry[],
  run: (variant: string, world: number, env: Record<string, string>) => Promise<StepTimes>,
  label: string,
  samples: Sample[],
  infos: Infos,
  rounds: number,
): Promise<InterleavedRounds> {
  const interleaved: InterleavedRounds = {};
  for (let round = 0; round < rounds; round++) {
    for (const [variant, world, setting] of plan) {
      const times = await run(variant, world, setting ? SETTING_ENV[setting] : {});
      if (variant === 'interleaved') {
        const bySetting = interleaved[world] ?? {};
        bySetting[setting ?? ''] = [...(bySetting[setting ?? ''] ?? []), times];
        interleaved[world] = bySetting;
      }
      for (const [mode, ms] of Object.entries(times)) {
        const name = `${label}${setting ? `${setting}-` : ''}${mode.startsWith('info:') ? `${variant}-` : ''}${mode}`;
        console.log(`round ${round + 1}/${rounds}: ${name} × ${world}: ${ms.toFixed(1)}`);
        if (mode.startsWith('info:')) {
          infos.push({ variant: name, world, value: ms });
          continue;
        }
        const old = samples.find((s) => s.variant === name && s.world === world);
        if (old) old.ms = Math.min(old.ms, ms);
        else samples.push({ variant: name, world, ms });
      }
    }
  }
  return interleaved;
}

import { runOnCpuWhen, someInput } from './run-on-cpu.js';

/**
 * tfjs-wasm 4.22 runs these kernels through XNNPACK, which takes at most 6 dims: on a tensor of
 * rank 7 or more its setup fails (a line on stderr) and the output comes back unwritten — add of
 * rank 7 gave 3.6e-41 for 1.5, every gradient through a rank-7 product was wrong, silently (probe
 * CZ, a shape-op fuzzer against torch; found by sweeping every op at rank 7 against cpu:
 * high-rank.test.ts). Above rank 6 they run on the cpu backend, tfjs's reference.
 */
const XNNPACK_ON_WASM = ['Add', 'Sub', 'Multiply', 'RealDiv', 'SquaredDifference', 'PadV2'] as const;
const XNNPACK_MAX_RANK = 6;

export function registerHighRankFallbacks(): void {
  for (const name of XNNPACK_ON_WASM)
    runOnCpuWhen(name, (args) => someInput(args, (x) => x.shape.length > XNNPACK_MAX_RANK));
}

import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AsyncCheckpointer, type FSDPModule, saveFSDPCheckpoint } from '@ddp/fsdp';
import type { Optimizer } from '@ddp/nn';
import { pinLeavingACoreFree, threadCpuNs } from './thread-cpu.js';

/** Training steps an async save overlaps in the stall measurement (every rank runs the same count). */
export const OVERLAPPED_STEPS = 3;
/** Saves of each kind; the fastest counts (load on a shared machine only adds time). */
export const SAVE_REPEATS = 2;

/**
 * A synchronous save's duration, and the stall of an async one: its host copy, the
 * OVERLAPPED_STEPS steps after it and any wait left for its commit, minus as many plain steps
 * (the fastest of two just before the saves and one after them). So work the writer thread
 * takes from later steps counts too, not only the first step's. Each the fastest of
 * SAVE_REPEATS. With `freeCore` every rank's main thread runs on CPU 0 and its other threads
 * (comm, the writer) on CPU 1, as with a core left for them. The AsyncCheckpointer is made
 * first, as a training script makes it once, and saves once before (its staging buffers are
 * then allocated, as in training). Each rank saves into its own run's temporary directory on
 * rank 0's choice of name: every rank of the bench runs on this host.
 */
export async function checkpointStall(
  root: FSDPModule,
  optimizer: Optimizer<{ lr: number }>,
  step: () => Promise<number>,
  rank: number,
  freeCore: boolean,
) {
  const dir = join(tmpdir(), `fsdp-bench-${process.env.MASTER_PORT ?? 'x'}`);
  const saver = new AsyncCheckpointer(root);
  // the synchronous saves, the stall's denominator, unpinned: pinned to one core they took 2.4× as long
  const sync: number[] = [];
  for (let i = 0; i < SAVE_REPEATS; i++) {
    const started = performance.now();
    await saveFSDPCheckpoint(dir, { root, optimizer, step: 1 });
    sync.push((performance.now() - started) / 1000);
  }
  if (freeCore) pinLeavingACoreFree(); // after the saver started its writer thread, which goes with the comm threads
  await (await saver.save(dir, { optimizer, step: 0 })).done;
  const plain: number[] = [];
  const plainCpu = { main: 0, other: 0 };
  const plainStep = async () => {
    const before = threadCpuNs();
    plain.push(await step());
    const cpu = cpuSince(before);
    plainCpu.main += cpu.main / 3;
    plainCpu.other += cpu.other / 3;
  };
  await plainStep();
  await plainStep();
  const overlapped: { call: number; total: number; cpu: { main: number; other: number } }[] = [];
  for (let i = 0; i < SAVE_REPEATS; i++) {
    const started = performance.now();
    const before = threadCpuNs();
    const { done } = await saver.save(dir, { optimizer, step: 2 });
    const call = (performance.now() - started) / 1000;
    for (let j = 0; j < OVERLAPPED_STEPS; j++) await step();
    await done;
    overlapped.push({ call, total: (performance.now() - started) / 1000, cpu: cpuSince(before) });
  }
  await plainStep();
  const fastest = overlapped.reduce((a, b) => (b.total < a.total ? b : a));
  await root.processGroup.barrier().wait();
  if (rank === 0) await rm(dir, { recursive: true, force: true });
  return {
    syncSaveSeconds: Math.min(...sync),
    asyncStallSeconds: fastest.total - OVERLAPPED_STEPS * Math.min(...plain),
    asyncSaveCallSeconds: fastest.call,
    asyncSaveSeconds: fastest.total,
    asyncMainCpuSeconds: fastest.cpu.main - OVERLAPPED_STEPS * plainCpu.main,
    asyncOtherCpuSeconds: fastest.cpu.other - OVERLAPPED_STEPS * plainCpu.other,
  };
}

/** CPU seconds this process's main thread and its other threads (comm, checkpoint writer, pool) ran since `before`. */
function cpuSince(before: Map<number, number>): { main: number; other: number } {
  let main = 0;
  let other = 0;
  for (const [tid, ns] of threadCpuNs()) {
    const used = (ns - (before.get(tid) ?? 0)) / 1e9;
    if (tid === process.pid) main += used;
    else other += used;
  }
  return { main, other };
}

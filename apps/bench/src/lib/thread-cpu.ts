import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';

/** CPU time (ns) each thread of this process has run so far, by thread id (Linux /proc schedstat; empty elsewhere). */
export function threadCpuNs(): Map<number, number> {
  const out = new Map<number, number>();
  let tids: string[];
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      out.set(Number(tid), Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/**
 * Per-thread CPU time summed over many timed spans, to split a step's CPU between the main
 * thread, the busiest other thread (@ddp/comm's comm thread in a DDP step; Node names every
 * thread "node", so it is found by its CPU) and the rest (GC, the thread pool).
 */
export class ThreadCpu {
  private readonly byKey = new Map<string, Map<number, number>>();

  /** Adds what each thread ran between `before` (a threadCpuNs()) and now to `key`'s sums. */
  add(key: string, before: Map<number, number>): void {
    const sums = this.byKey.get(key) ?? new Map<number, number>();
    this.byKey.set(key, sums);
    for (const [tid, ns] of threadCpuNs()) sums.set(tid, (sums.get(tid) ?? 0) + ns - (before.get(tid) ?? 0));
  }

  /**
   * Per key, ms per span of `main`, `comm` (the non-main thread busiest over all keys) and
   * `rest`, as `thread:<key>:<which>`.
   */
  report(spans: number): Record<string, number> {
    const total = new Map<number, number>();
    for (const sums of this.byKey.values())
      for (const [tid, ns] of sums) if (tid !== process.pid) total.set(tid, (total.get(tid) ?? 0) + ns);
    const comm = [...total].sort((a, b) => b[1] - a[1])[0]?.[0];
    const ms = (ns: number) => ns / 1e6 / spans;
    const out: Record<string, number> = {};
    for (const [key, sums] of this.byKey) {
      let rest = 0;
      for (const [tid, ns] of sums) if (tid !== process.pid && tid !== comm) rest += ns;
      out[`thread:${key}:main`] = ms(sums.get(process.pid) ?? 0);
      out[`thread:${key}:comm`] = ms(comm === undefined ? 0 : (sums.get(comm) ?? 0));
      out[`thread:${key}:rest`] = ms(rest);
    }
    return out;
  }
}

/**
 * Pins this process's main thread to CPU 0 and its other threads (the comm thread, the
 * thread pool, V8's) to CPU 1: with every rank doing so, backward runs on one core and
 * communication has the other, as with one rank per two cores (`pnpm bench ddp`'s free-core
 * rows). Threads the main thread starts later inherit CPU 0.
 */
export function pinLeavingACoreFree(): void {
  for (const tid of threadCpuNs().keys()) {
    try {
      execFileSync('taskset', ['-p', '-c', tid === process.pid ? '0' : '1', String(tid)], { stdio: 'ignore' });
    } catch (error) {
      if (existsSync(`/proc/self/task/${tid}`)) throw error; // else the thread ended meanwhile
    }
  }
}

import { describe, expect, it } from 'vitest';
import { IssueOrder } from './mpi-issue-order.js';

describe("the MPI backend's issue order", () => {
  it('holds a call touching an unfinished one (staged again), and every later call of its communicator behind it (staged once)', async () => {
    const order = new IssueOrder();
    const [x, y, z] = [new Float32Array(4), new Float32Array(4), new Float32Array(4)];
    const log: string[] = [];
    let finishA = () => {};
    const a = order.issue(0, [x], async (restage) => {
      log.push(`A ${restage}`);
      await new Promise<void>((resolve) => {
        finishA = resolve;
      });
    });
    const b = order.issue(0, [x.subarray(1, 2)], async (restage) => {
      log.push(`B ${restage}`);
    });
    // y overlaps nothing: it waits behind the held B only, so its staging at the call stands
    const c = order.issue(0, [y], async (restage) => {
      log.push(`C ${restage}`);
    });
    // another communicator's call goes on: holding it too deadlocked ranks whose arrays tied two groups apart
    const other = order.issue(1, [z], async (restage) => {
      log.push(`E ${restage}`);
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(log).toEqual(['A false', 'E false']);
    await other;
    finishA();
    await Promise.all([a, b, c]);
    expect(log).toEqual(['A false', 'E false', 'B true', 'C false']);
    // nothing unfinished or held: at once
    const d = order.issue(0, [x], async (restage) => {
      log.push(`D ${restage}`);
    });
    expect(log.at(-1)).toBe('D false');
    await d;
  });

  it('with one MPI thread for every group (MPI_THREAD_MULTIPLE not granted): every later call behind a held one', async () => {
    // review: per group there, a rank whose call on g1 was held dispatched g2's first, another g1's: both waited
    const order = new IssueOrder(false);
    const [x, z] = [new Float32Array(4), new Float32Array(4)];
    const log: string[] = [];
    let finishA = () => {};
    const a = order.issue(0, [x], async () => {
      log.push('A');
      await new Promise<void>((resolve) => {
        finishA = resolve;
      });
    });
    const b = order.issue(0, [x], async () => {
      log.push('B');
    });
    const other = order.issue(1, [z], async () => {
      log.push('C');
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(log).toEqual(['A']);
    finishA();
    await Promise.all([a, b, other]);
    expect(log).toEqual(['A', 'B', 'C']);
  });
});

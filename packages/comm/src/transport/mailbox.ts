import type { CommError } from '../errors.js';
import type { Frame } from './frame.js';

interface Waiter {
  groupId: number;
  resolve: (f: Frame) => void;
  reject: (e: CommError) => void;
}

/** Frames from one peer, queued per channel (group + collective, or group + p2p tag). */
export class Mailbox {
  private readonly frames = new Map<string, Frame[]>();
  private readonly waiters = new Map<string, Waiter[]>();
  /** Set once the peer is gone: every later receive fails with it. */
  failure: CommError | null = null;

  deliver(channel: string, f: Frame): void {
    const ws = this.waiters.get(channel);
    const w = ws?.shift();
    if (w) {
      if (ws?.length === 0) this.waiters.delete(channel);
      w.resolve(f);
      return;
    }
    let q = this.frames.get(channel);
    if (!q) {
      q = [];
      this.frames.set(channel, q);
    }
    q.push(f);
  }

  /** Next frame on the channel; `cancel` removes the wait (for timeouts). */
  receive(channel: string, groupId: number): { promise: Promise<Frame>; cancel: () => void } {
    const q = this.frames.get(channel);
    const f = q?.shift();
    if (f) {
      if (q?.length === 0) this.frames.delete(channel);
      return { promise: Promise.resolve(f), cancel: () => {} };
    }
    if (this.failure) return { promise: Promise.reject(this.failure), cancel: () => {} };
    let waiter!: Waiter;
    const promise = new Promise<Frame>((resolve, reject) => {
      waiter = { groupId, resolve, reject };
    });
    const list = this.waiters.get(channel) ?? [];
    list.push(waiter);
    this.waiters.set(channel, list);
    const cancel = () => {
      const l = this.waiters.get(channel);
      if (!l) return;
      const i = l.indexOf(waiter);
      if (i >= 0) l.splice(i, 1);
      if (l.length === 0) this.waiters.delete(channel);
    };
    return { promise, cancel };
  }

  /** Rejects the waits of one group (abort) or of all groups (peer lost). */
  failWaiters(err: CommError, groupId?: number): void {
    for (const [ch, list] of this.waiters) {
      const keep = list.filter((w) => groupId !== undefined && w.groupId !== groupId);
      for (const w of list) if (!keep.includes(w)) w.reject(err);
      if (keep.length) this.waiters.set(ch, keep);
      else this.waiters.delete(ch);
    }
  }

  /** Drops queued frames of a group (after an abort, they can never be matched). */
  dropGroup(groupId: number): void {
    for (const ch of this.frames.keys()) if (ch.startsWith(`${groupId}:`)) this.frames.delete(ch);
  }
}

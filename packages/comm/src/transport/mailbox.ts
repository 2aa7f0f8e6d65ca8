import type { CommError } from '../errors.js';
import type { Frame, FrameHeader } from './frame.js';

/**
 * Where a posted receive wants a frame's payload to go, so it is consumed straight from
 * the socket's read buffer (no intermediate copy): copied into place or reduced into place.
 */
export interface Sink {
  /** Checks the header (fingerprint, length); throws a CommError to refuse the frame. */
  begin(h: FrameHeader): void;
  /** A piece of the payload, valid only during the call. */
  write(chunk: Uint8Array): void;
  /** Optionally, memory the next socket read may fill directly (at most `remaining` bytes). */
  direct?(remaining: number): Uint8Array | null;
  /** Called after `direct` memory received `n` bytes. */
  wrote?(n: number): void;
}

interface Waiter {
  groupId: number;
  sink: Sink | null;
  resolve: (f: Frame) => void;
  reject: (e: CommError) => void;
}

/** A receive the frame reader has taken for the frame whose header it just read. */
export interface Claimed {
  sink: Sink;
  resolve: (f: Frame) => void;
  reject: (e: CommError) => void;
}

const EMPTY = new Uint8Array(0);

/** Frames from one peer, queued per channel (group + collective, or group + p2p tag). */
export class Mailbox {
  private readonly frames = new Map<string, Frame[]>();
  private readonly waiters = new Map<string, Waiter[]>();
  /** Set once the peer is gone: every later receive fails with it. */
  failure: CommError | null = null;

  /**
   * Called when a frame's header arrives: the first receive posted on the channel takes it
   * (if it has a sink and no earlier frame is queued), else the payload will be buffered.
   */
  claim(channel: string): Claimed | null {
    if (this.frames.has(channel)) return null;
    const ws = this.waiters.get(channel);
    const w = ws?.[0];
    if (!w?.sink) return null;
    ws?.shift();
    if (ws?.length === 0) this.waiters.delete(channel);
    return { sink: w.sink, resolve: w.resolve, reject: w.reject };
  }

  deliver(channel: string, f: Frame): void {
    const ws = this.waiters.get(channel);
    const w = ws?.shift();
    if (w) {
      if (ws?.length === 0) this.waiters.delete(channel);
      feed(w, f);
      return;
    }
    let q = this.frames.get(channel);
    if (!q) {
      q = [];
      this.frames.set(channel, q);
    }
    q.push(f);
  }

  /** Next frame on the channel (into `sink` if given); `cancel` withdraws the wait. */
  receive(channel: string, groupId: number, sink: Sink | null): { promise: Promise<Frame>; cancel: () => void } {
    const q = this.frames.get(channel);
    const f = q?.shift();
    if (f) {
      if (q?.length === 0) this.frames.delete(channel);
      return {
        promise: new Promise((resolve, reject) => feed({ groupId, sink, resolve, reject }, f)),
        cancel: () => {},
      };
    }
    if (this.failure) return { promise: Promise.reject(this.failure), cancel: () => {} };
    let waiter!: Waiter;
    const promise = new Promise<Frame>((resolve, reject) => {
      waiter = { groupId, sink, resolve, reject };
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

  /** The first queued frame of a channel that matches. */
  find(channel: string, match: (h: FrameHeader) => boolean): Frame | undefined {
    return this.frames.get(channel)?.find((f) => match(f.header));
  }

  /** Drops queued frames of a group (after an abort, they can never be matched). */
  dropGroup(groupId: number): void {
    for (const ch of this.frames.keys()) if (ch.startsWith(`${groupId}:`)) this.frames.delete(ch);
  }
}

/** Hands a fully buffered frame to a waiter, through its sink if it has one. */
function feed(w: Waiter, f: Frame): void {
  if (!w.sink) {
    w.resolve(f);
    return;
  }
  try {
    w.sink.begin(f.header);
    if (f.payload.byteLength > 0) w.sink.write(f.payload);
    w.resolve({ header: f.header, payload: EMPTY });
  } catch (e) {
    w.reject(e as CommError);
  }
}

import { connect, type NetConnectOpts, type Server, type Socket } from 'node:net';
import { encodeHeader, type FrameHeader, PAD, padOf } from './frame.js';

/** How to reach one rank: TCP always, a Unix-domain socket from the same host. */
export interface PeerAddress {
  rank: number;
  host: string;
  port: number;
  uds: string | null;
  /** Hostname + network namespace + boot id: equal ids can use the Unix socket. */
  hostId: string;
  /** Names this rank's shared-memory segments; null when it has no shared memory (shm-lane.ts). */
  shm?: string | null;
}

/** Where a listener binds or a dialer connects: TCP, or a Unix-domain socket (path or abstract name). */
export type SocketAddress = { host: string; port: number } | { path: string };

/**
 * The two meshes of a process (comm thread, main thread) each count what they write in
 * their own half of one shared buffer: one writer per counter, no atomics needed.
 */
export function wireCounterViews(sab: SharedArrayBuffer): { commThread: Float64Array; mainThread: Float64Array } {
  return { commThread: new Float64Array(sab, 0, 2), mainThread: new Float64Array(sab, 16, 2) };
}

/** Starts `server` listening; rejects on the listen error (port in use, bad path) only. */
export function listenOn(server: Server, where: SocketAddress): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(where, () => {
      server.off('error', reject);
      server.on('error', () => {});
      resolve();
    });
  });
}

/** Connects; `onread` lets the caller supply the buffers the socket reads into (no copy). */
export function dial(opts: SocketAddress & { onread?: unknown }): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(opts as unknown as NetConnectOpts);
    s.once('connect', () => {
      s.off('error', reject);
      resolve(s);
    });
    s.once('error', reject);
  });
}

/**
 * Writes one frame (header, payload, padding to the frame alignment) as one corked batch;
 * `done` runs once the bytes are handed to the kernel. `counters` ([bytes, frames]) count
 * what goes on the wire, headers and padding included.
 */
export function writeFrame(
  sock: Socket,
  header: FrameHeader,
  payload: Uint8Array | null,
  done: (err?: Error | null) => void,
  counters?: Float64Array,
): void {
  const len = payload?.byteLength ?? 0;
  const hdr = encodeHeader(header);
  if (counters) {
    counters[0] += hdr.byteLength + len + padOf(len);
    counters[1] += 1;
  }
  if (len === 0) {
    sock.write(hdr, done);
    return;
  }
  sock.cork();
  sock.write(hdr);
  const pad = padOf(len);
  if (pad) {
    sock.write(payload as Uint8Array);
    sock.write(PAD.subarray(0, pad), done);
  } else {
    sock.write(payload as Uint8Array, done);
  }
  sock.uncork();
}

import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** What `call` runs (src/mpi.cc's Kind, same order). */
export const Kind = {
  init: 0,
  split: 1,
  finalize: 2,
  allReduce: 3,
  broadcast: 4,
  reduce: 5,
  allGather: 6,
  gather: 7,
  scatter: 8,
  reduceScatter: 9,
  allToAll: 10,
  barrier: 11,
  p2p: 12,
} as const;
export type Kind = (typeof Kind)[keyof typeof Kind];

/** How the members check a collective before running it: not at all (p2p), same call, same call and count. */
export const Rule = { none: 0, sameCall: 1, sameCount: 2 } as const;
/** Element types MPI moves: 1 float32, 2 float64, 3 int32, 4 16-bit words (float16/bfloat16 moved, not reduced). */
export type MpiType = 1 | 2 | 3 | 4;
/** Outcome of a call: done, refused by the agreement (every member refuses it), or an MPI error. */
export const Status = { ok: 0, refused: 1, mpiFailed: 2 } as const;

/** Descriptor layout (then one count per member): op, dtype, reduce op, root, count, failed-here flag. */
export const DESC_FIXED = 6;

/** [status, every member's descriptor (when agreed on), output (allGather/gather), MPI's message, int results]. */
export type CallResult = [
  status: number,
  all: Int32Array | undefined,
  out: ArrayBuffer,
  message: string,
  i0: number,
  i1: number,
];

type Bytes = ArrayBufferView | null;

/** The native addon (src/mpi.cc). Each communicator's calls run on an MPI thread of its own, in issue order. */
export interface MpiAddon {
  /**
   * init: MPI_Init_thread (i0 rank, i1 size). split: MPI_Comm_split of `comm` with color `root`
   * (−1: not a member) and key `op` (i0 the new handle or −1). Collectives: the descriptor
   * `desc` is agreed on under `rule`, then the op runs on `a` (in place or input) and `b` (output);
   * `counts` are allToAll's receive counts or p2p's entries (is send, peer, tag, byte offset, bytes).
   */
  call(
    kind: Kind,
    comm: number,
    rule: number,
    type: number,
    op: number,
    root: number,
    desc: Int32Array | null,
    counts: Int32Array | null,
    a: Bytes,
    b: Bytes,
  ): Promise<CallResult>;
  /** Calls still pending (stuck after a timeout) no longer keep the process alive. */
  unref(): void;
}

let loaded: MpiAddon | null | undefined;

/** The addon, or null where it was not built (no Open MPI development files, no compiler). */
export function loadMpi(): MpiAddon | null {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)('../build/Release/ddp_mpi.node') as MpiAddon;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}

/** Why the addon is missing, for the error that says so. */
export function whyMissing(): string {
  const note = new URL('../build/not-built.txt', import.meta.url);
  if (existsSync(note)) return `@ddp/mpi was not built at install: ${readFileSync(note, 'utf8').trim()}`;
  return (
    '@ddp/mpi was never built: its install script did not run (pnpm 10: `pnpm approve-builds`, then ' +
    '`pnpm rebuild @ddp/mpi`)'
  );
}

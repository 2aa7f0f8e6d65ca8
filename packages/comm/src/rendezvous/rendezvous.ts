import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CommError,
  CommTimeoutError,
  DuplicateRankError,
  EarlierAttemptError,
  WorldSizeMismatchError,
} from '../errors.js';
import { decodeText, type Store } from '../store/store.js';
import { LATER_ATTEMPT_KEY } from '../store/tcp-store-server.js';
import type { PeerAddress } from '../transport/socket-io.js';

/**
 * The world size is settled before anything depends on it (the generation of a reused store
 * is a count of ranks): the first rank to arrive records its WORLD_SIZE, a rank with another
 * one records the conflict and raises, and the ranks waiting for their peers look for the
 * conflict every CONFLICT_POLL_MS, so every rank names both sizes within a second or so.
 */
const SIZE_KEY = 'ddp/world_size';
const CONFLICT_KEY = 'ddp/world_size_conflict';
const CONFLICT_POLL_MS = 500;
/** How long the store's host keeps serving after a conflict, so the ranks still waiting can read it. */
const CONFLICT_LINGER_MS = 3 * CONFLICT_POLL_MS;

/** On the store's host, after an error the ranks still waiting read from its store: keeps serving a while. */
export async function lingerIfTold(e: unknown): Promise<void> {
  if (e instanceof WorldSizeMismatchError || e instanceof EarlierAttemptError) await sleep(CONFLICT_LINGER_MS);
}

/** Which rank claimed which size. */
interface SizeClaim {
  rank: number;
  worldSize: number;
}

function mismatch(rank: number, worldSize: number, other: SizeClaim): WorldSizeMismatchError {
  return new WorldSizeMismatchError(
    `rank ${rank}: ranks disagree on the world size: ` +
      `this rank has WORLD_SIZE=${worldSize}, rank ${other.rank} has ${other.worldSize}`,
    { rank, ranks: [other.rank], op: 'initProcessGroup' },
  );
}

const DUPLICATE_KEY = 'ddp/duplicate_rank';

/** Who claimed a rank (or a node's ranks: `node`), and who claimed it again. */
interface RankClaim {
  rank: number;
  holder: string;
  claimant: string;
  node?: number;
}

function duplicate(rank: number, c: RankClaim): DuplicateRankError {
  const why =
    c.node === undefined
      ? `rank ${c.rank} was started twice (${c.holder}, then ${c.claimant}): two launchers given one --node-rank, ` +
        'or one RANK?'
      : `node ${c.node} has ranks of two launchers (${c.holder}, then ${c.claimant}, with rank ${c.rank}): two ` +
        'jobs sharing one port, --rdzv-id and DDP_SECRET, or two launchers given one --node-rank?';
  return new DuplicateRankError(`rank ${rank}: ${why}`, { rank, ranks: [c.rank], op: 'initProcessGroup' });
}

/**
 * Claims this rank in a store made for this world (the counts of a store reused across inits
 * cannot tell): a second process of the same rank raises DuplicateRankError and records it, and
 * the ranks waiting for their peers raise it too. Before, its arrival counted towards the world,
 * and every rank ended in a timeout naming a rank that had arrived twice as missing. With
 * `launcher` (ddp-run's), the node's ranks must also come from one launcher.
 */
export async function claimRank(store: Store, rank: number, launcher?: { id: string; node: number }): Promise<void> {
  const claimant = `pid ${process.pid} on ${hostname()} (${randomBytes(4).toString('hex')})`;
  const holder = decodeText(await store.compareSet(`ddp/rank_claim/${rank}`, '', claimant));
  if (holder !== claimant) await refuse({ rank, holder, claimant });
  if (!launcher) return;
  // two jobs given one port, run id and secret met in one store: each rank claimed its own rank, and
  // the world they made mixed both jobs' gradients (both exited 0)
  const launch = `launcher ${launcher.id}`;
  const first = decodeText(await store.compareSet(`ddp/node_claim/${launcher.node}`, '', launch));
  if (first !== launch) await refuse({ rank, holder: first, claimant: launch, node: launcher.node });

  async function refuse(claim: RankClaim): Promise<never> {
    await store.set(DUPLICATE_KEY, JSON.stringify(claim));
    throw duplicate(rank, claim);
  }
}

/** Records this rank's world size, or raises WorldSizeMismatchError (telling the others) if another came first. */
export async function agreeOnWorldSize(store: Store, rank: number, worldSize: number): Promise<void> {
  const mine = JSON.stringify({ rank, worldSize } satisfies SizeClaim);
  const first = JSON.parse(decodeText(await store.compareSet(SIZE_KEY, '', mine))) as SizeClaim;
  if (first.worldSize === worldSize) return;
  await store.set(CONFLICT_KEY, mine);
  throw mismatch(rank, worldSize, first);
}

function parseAddress(text: string, rank: number): PeerAddress {
  const a = JSON.parse(text) as PeerAddress;
  if (
    typeof a !== 'object' ||
    a === null ||
    a.rank !== rank ||
    typeof a.host !== 'string' ||
    typeof a.port !== 'number'
  ) {
    throw new CommError(`rendezvous: bad address record for rank ${rank}`, { op: 'initProcessGroup', ranks: [rank] });
  }
  return a;
}

/**
 * Reads every rank's `<key>/<r>` address record from the generation's store `rdv` once all
 * are there; raises WorldSizeMismatchError (or DuplicateRankError) as soon as `store` holds a conflict,
 * EarlierAttemptError once a later attempt of this run (a node's launcher restarted) knocked at it, and
 * CommTimeoutError naming the ranks that never arrived.
 */
export async function readAddresses(
  rdv: Store,
  store: Store,
  key: string,
  { rank, worldSize, timeoutMs }: { rank: number; worldSize: number; timeoutMs: number },
): Promise<PeerAddress[]> {
  const keys = Array.from({ length: worldSize }, (_, r) => `${key}/${r}`);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await rdv.wait(keys, Math.max(1, Math.min(CONFLICT_POLL_MS, deadline - Date.now())));
      break;
    } catch (e) {
      if (!(e instanceof CommTimeoutError)) throw e;
    }
    if (await store.check([CONFLICT_KEY])) {
      throw mismatch(rank, worldSize, JSON.parse(decodeText(await store.get(CONFLICT_KEY))) as SizeClaim);
    }
    if (await store.check([DUPLICATE_KEY])) {
      throw duplicate(rank, JSON.parse(decodeText(await store.get(DUPLICATE_KEY))) as RankClaim);
    }
    if (await store.check([LATER_ATTEMPT_KEY])) {
      // its node restarted (a rank failed before meeting): every node restarts, or they never meet again
      const later = `a rank of "${decodeText(await store.get(LATER_ATTEMPT_KEY))}", a later attempt of this run`;
      const why = `${later}, is waiting: this attempt ends so that it restarts too`;
      throw new EarlierAttemptError(`rank ${rank}: rendezvous: ${why}`, { rank, op: 'initProcessGroup' });
    }
    if (Date.now() >= deadline) {
      const here = await Promise.all(keys.map((k) => rdv.check([k])));
      const missing = keys.flatMap((_, r) => (here[r] ? [] : [r]));
      const why = `ranks ${missing.join(', ')} never arrived within ${timeoutMs} ms (WORLD_SIZE=${worldSize})`;
      throw new CommTimeoutError(`rank ${rank}: rendezvous: ${why}`, { rank, ranks: missing, op: 'initProcessGroup' });
    }
  }
  return Promise.all(keys.map(async (k, r) => parseAddress(decodeText(await rdv.get(k)), r)));
}

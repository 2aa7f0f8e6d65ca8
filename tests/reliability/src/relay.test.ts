import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { explainWorld, runWorld } from '@ddp/launch/testing';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { childScript } from './child-script.js';
import { FaultRelay } from './relay.js';
import { type RelayedWorld, relayedWorld } from './relay-fixture.js';

const ACCEPTED = ['PeerLostError', 'ProtocolError', 'CommTimeoutError'];

describe('FaultRelay on its own', () => {
  let relay: FaultRelay | undefined;
  afterEach(async () => relay?.close());

  async function echoThrough(r: FaultRelay): Promise<Socket> {
    const echo = createServer((s) => {
      s.on('error', () => {});
      s.pipe(s);
    });
    echo.listen(0, '127.0.0.1');
    await once(echo, 'listening');
    const a = echo.address() as { port: number };
    const front = await r.route({ host: '127.0.0.1', port: a.port }, 'echo');
    const s = connect(front);
    await once(s, 'connect');
    s.on('close', () => echo.close());
    return s;
  }

  it('keeps every byte in order under delay, jitter and slow reads', async () => {
    relay = new FaultRelay('127.0.0.1', { delayMs: 1, jitterMs: 5, readBytesPerSec: 2_000_000 }, 7);
    const s = await echoThrough(relay);
    const sent = Buffer.alloc(300_000);
    for (let i = 0; i < sent.length; i++) sent[i] = (i * 31 + (i >> 8)) & 255;
    const got: Buffer[] = [];
    let n = 0;
    const done = new Promise<void>((resolve) =>
      s.on('data', (c: Buffer) => {
        got.push(c);
        n += c.length;
        if (n >= sent.length) resolve();
      }),
    );
    for (let i = 0; i < sent.length; i += 7000) s.write(sent.subarray(i, i + 7000));
    await done;
    s.destroy();
    expect(Buffer.concat(got).equals(sent)).toBe(true);
  });

  it('resets both ends and half-closes one way', async () => {
    relay = new FaultRelay();
    const a = await echoThrough(relay);
    const error = new Promise<string | undefined>((resolve) =>
      a.once('error', (e: NodeJS.ErrnoException) => resolve(e.code)),
    );
    a.write('x');
    await once(a, 'data');
    expect(relay.resetAll()).toBe(1);
    expect(await error).toBe('ECONNRESET');
    const b = await echoThrough(relay);
    const ended = once(b, 'end');
    relay.halfCloseAll('toDialer', (l) => l === 'echo');
    await ended; // the dialer saw FIN
  });
});

describe('a reset toward the reading side is a lost peer, not a crashed comm worker', () => {
  let world: RelayedWorld | undefined;
  afterEach(async () => world?.close());
  // regression: the dialed (reading) socket once had no 'error' listener, so an RST crashed the comm thread
  it('RST toward the dialers only, while idle between collectives: PeerLostError on every rank', {
    timeout: 60_000,
  }, async () => {
    world = await relayedWorld();
    const w = world;
    const ready = new Set<number>();
    const run = await world.run(['idle'], {
      nproc: 2,
      timeoutMs: 40_000,
      env: { DDP_TIMEOUT_MS: '8000' },
      onResult: (rank, r) => {
        if (r.idle) ready.add(rank);
        if (ready.size === 2) w.relay.resetAll((l) => l.startsWith('peer:'), 'dialer');
      },
    });
    for (const o of run.results) expect(o?.error, explainWorld(run)).toBe('PeerLostError');
  });
});

describe('collectives through the relay (3 ranks, TCP)', () => {
  let world: RelayedWorld | undefined;
  afterEach(async () => world?.close());
  // what each rank saw under each fatal fault, for RELIABILITY.md
  const seen: Record<string, unknown> = {};
  afterAll(() =>
    writeFileSync(new URL('../results/relay-faults.json', import.meta.url), `${JSON.stringify(seen, null, 2)}\n`),
  );

  it.each([
    ['delay 2 ms + jitter 0–8 ms', { delayMs: 2, jitterMs: 8 }],
    ['slow reads (3 MB/s per connection)', { readBytesPerSec: 3_000_000 }],
    ['stalls (400 ms every 1.5 s, below the heartbeat limit)', { stallEveryMs: 1500, stallMs: 400 }],
  ])('the suite is bit-exact under %s', { timeout: 90_000 }, async (_name, plan) => {
    world = await relayedWorld(plan);
    const run = await world.run(['suite', '1'], { nproc: 3, timeoutMs: 80_000 });
    expect(world.relay.bytes).toBeGreaterThan(3 * 64 * 1024 * 4); // the ring sizes went through the relay
    for (const r of run.results) expect(r).toEqual({ failures: [], rounds: 1 });
  });

  it('the store connections reset after rendezvous: collectives carry on, bit-exact', { timeout: 90_000 }, async () => {
    world = await relayedWorld();
    const w = world;
    const ready = new Set<number>();
    let resets = 0;
    const run = await world.run(['suite', '1'], {
      nproc: 3,
      timeoutMs: 60_000,
      onResult: (rank, r) => {
        if (r.ready) ready.add(rank);
        if (r.ready && ready.size === 3) resets = w.relay.resetAll((l) => l === 'store');
      },
    });
    expect(resets).toBe(3);
    for (const r of run.results) expect(r).toEqual({ failures: [], rounds: 1 });
  });

  it('20 DDP steps under delay, jitter and slow reads end with the same parameters, bit for bit, as without the relay', {
    timeout: 120_000,
  }, async () => {
    const args = ['0', '20'];
    // over TCP, as through the relay: one host's shared memory would sum in another order
    const direct = await runWorld<Record<string, unknown>>({
      script: childScript('soak.child.ts'),
      nprocs: 3,
      args,
      timeoutMs: 60_000,
      env: { ...process.env, DDP_TRANSPORT: 'tcp' },
    });
    world = await relayedWorld({ delayMs: 2, jitterMs: 8, readBytesPerSec: 3_000_000 });
    const relayed = await world.run(args, { script: 'soak.child.ts', nproc: 3, timeoutMs: 60_000 });
    const want = direct.results.map((r) => r?.paramsSha256);
    expect(new Set(want).size).toBe(1);
    expect(relayed.results.map((r) => r?.paramsSha256)).toEqual(want);
    expect(world.relay.bytes).toBeGreaterThan(0);
  });

  const faults: [string, (relay: FaultRelay) => void][] = [
    ['peer connections reset (RST)', (r) => r.resetAll((l) => l.startsWith('peer:'))],
    ['peer connections half-closed toward the reader', (r) => r.halfCloseAll('toDialer', (l) => l.startsWith('peer:'))],
    [
      'peer connections half-closed toward the writer',
      (r) => r.halfCloseAll('toListener', (l) => l.startsWith('peer:')),
    ],
    [
      'peer connections reset toward the listening (writing) side only',
      (r) => r.resetAll((l) => l.startsWith('peer:'), 'listener'),
    ],
    // bytes held, sockets open (a host that froze): the heartbeat (10 × DDP_HEARTBEAT_MS) or the op timeout fires
    ['an endless stall', (r) => r.stall(120_000)],
  ];
  it.each(faults)('%s mid-run: a typed error on every rank, no hang', { timeout: 90_000 }, async (name, inject) => {
    world = await relayedWorld();
    const ready = new Set<number>();
    const w = world;
    const run = await world.run(['loop'], {
      nproc: 3,
      timeoutMs: 60_000,
      env: { DDP_TIMEOUT_MS: '8000', DDP_HEARTBEAT_MS: '500' },
      onResult: (rank, r) => {
        if (!r.ready) return;
        ready.add(rank);
        // every rank is in its loop: let some traffic pass, then inject
        if (ready.size === 3) void w.relay.whenBytes(w.relay.bytes + 200_000).then(() => inject(w.relay));
      },
    });
    const outcomes = run.results;
    seen[name] = outcomes.map((o) => (o ? `${o.error}: ${o.message}` : null));
    for (const o of outcomes) expect(ACCEPTED, explainWorld(run)).toContain(o?.error);
  });
});

import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  AddressInUseError,
  AuthError,
  type CommError,
  CommTimeoutError,
  EarlierAttemptError,
  HashStore,
  InvalidArgumentError,
  PrefixStore,
  RunMismatchError,
  type Store,
  TCPStore,
} from '../index.js';
import { decodeText } from './store.js';
import { LATER_ATTEMPT_KEY } from './tcp-store-server.js';

const text = (v: Uint8Array) => decodeText(v);
const opened: Store[] = [];
afterEach(async () => {
  for (const s of opened.splice(0).reverse()) await s.close();
});

async function tcpPair(timeoutMs = 2000): Promise<[TCPStore, TCPStore]> {
  const server = await TCPStore.create({ host: '127.0.0.1', port: 0, secret: 's3', isServer: true, timeoutMs });
  const client = await TCPStore.create({ host: '127.0.0.1', port: server.port, secret: 's3', timeoutMs });
  opened.push(server, client);
  return [server, client];
}

/** Two handles on one store of each kind; `timeoutMs`: the store's own (get's) timeout. */
const flavours: [string, (timeoutMs?: number) => Promise<[Store, Store]>][] = [
  [
    'HashStore',
    async (timeoutMs = 2000) => {
      const s = new HashStore(timeoutMs);
      return [s, s];
    },
  ],
  ['TCPStore', tcpPair],
  [
    'PrefixStore over TCPStore',
    async (timeoutMs) => {
      const [a, b] = await tcpPair(timeoutMs);
      return [new PrefixStore('p', a), new PrefixStore('p', b)];
    },
  ],
];

describe.each(flavours)('%s', (_, make) => {
  it('set/get, add, compareSet, deleteKey, numKeys, check', async () => {
    const [a, b] = await make();
    await a.set('k', 'v1');
    expect(text(await b.get('k'))).toBe('v1');
    expect(await a.add('n', 3)).toBe(3);
    expect(await b.add('n', -5)).toBe(-2);
    expect(text(await b.compareSet('k', 'nope', 'x'))).toBe('v1');
    expect(text(await b.compareSet('k', 'v1', 'v2'))).toBe('v2');
    expect(text(await a.compareSet('fresh', '', 'init'))).toBe('init');
    expect(await a.check(['k', 'n'])).toBe(true);
    expect(await a.check(['k', 'missing'])).toBe(false);
    expect(await a.numKeys()).toBeGreaterThanOrEqual(3);
    expect(await b.deleteKey('k')).toBe(true);
    expect(await b.deleteKey('k')).toBe(false);
    await a.set('bin', new Uint8Array([0, 255, 7]));
    expect([...(await b.get('bin'))]).toEqual([0, 255, 7]);
    // a Node Buffer set, then changed, and a value read, then changed: the store keeps what was set
    // (HashStore kept a view of both: Buffer's slice() is one)
    const given = Buffer.from([1, 2, 3]);
    await a.set('buf', given);
    given[0] = 9;
    (await b.get('buf'))[1] = 9;
    expect([...(await b.get('buf'))]).toEqual([1, 2, 3]);
  });

  it('get and wait block until another client sets the key', async () => {
    const [a, b] = await make();
    const got = b.get('later');
    const waited = b.wait(['later', 'later2']);
    const setter = new Promise((resolve) => setTimeout(resolve, 50))
      .then(() => a.set('later', 'x'))
      .then(() => a.set('later2', 'y'));
    expect(text(await got)).toBe('x');
    await waited;
    await setter;
  });

  it.each([Number.POSITIVE_INFINITY, 2 ** 31])(
    'get and wait with timeout %s ms wait for a key set 300 ms later',
    async (t) => {
      // before: Node fired timers of 2^31 ms or more after 1 ms, a CommTimeoutError at once
      const [a, b] = await make(t);
      const got = b.get('late');
      const waited = b.wait(['late'], t);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await a.set('late', 'x');
      expect(text(await got)).toBe('x');
      await waited;
    },
  );

  it('add refuses an amount that is not a safe integer (InvalidArgumentError); the key stays usable', async () => {
    // before: 0.5, NaN or 2**60 were added, the key held "0.5" or "NaN", and the next add failed (CommError on
    // TCPStore, InvalidArgumentError on HashStore)
    const [a, b] = await make();
    await a.add('counter', 2);
    for (const bad of [0.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60])
      await expect(b.add('counter', bad)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(b.add('counter', Number.MAX_SAFE_INTEGER)).rejects.toThrow(/past a safe integer/);
    expect(await a.add('counter', 1)).toBe(3);
    await a.set('text', 'abc');
    await expect(b.add('text', 1)).rejects.toBeInstanceOf(InvalidArgumentError);
  });

  it('refuses keys with a lone surrogate (InvalidArgumentError); well-formed ones stay distinct', async () => {
    // before: a TCPStore sent both as UTF-8 U+FFFD, one key: the second set overwrote the first
    const [a, b] = await make();
    for (const bad of ['\ud800', 'x\udc00', '\udc00\ud800']) {
      await expect(a.set(bad, '1')).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(b.get(bad)).rejects.toThrow(/not well-formed/);
      await expect(b.add(bad, 1)).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(b.wait(['ok', bad])).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(b.check([bad])).rejects.toBeInstanceOf(InvalidArgumentError);
    }
    await a.set('\ud83d\ude00', 'pair');
    await a.set('\ufffd', 'replacement');
    expect(text(await b.get('\ud83d\ude00'))).toBe('pair');
    expect(text(await b.get('\ufffd'))).toBe('replacement');
  });

  it('wait raises CommTimeoutError after its timeout', async () => {
    const [, b] = await make();
    await expect(b.wait(['never'], 100)).rejects.toBeInstanceOf(CommTimeoutError);
    // the store still works after a timed-out wait
    await b.set('after', '1');
    expect(text(await b.get('after'))).toBe('1');
  });
});

describe('TCPStore security', () => {
  it('refuses a client with the wrong secret (AuthError) and keeps serving', async () => {
    const [server] = await tcpPair();
    await expect(
      TCPStore.create({ host: '127.0.0.1', port: server.port, secret: 'wrong', timeoutMs: 2000 }),
    ).rejects.toBeInstanceOf(AuthError);
    await server.set('still', 'ok');
    expect(text(await server.get('still'))).toBe('ok');
  });

  it('survives random bytes and an oversized length prefix', async () => {
    const [server, client] = await tcpPair();
    for (const junk of [
      Buffer.from('GET / HTTP/1.1\r\n\r\n'),
      Buffer.alloc(4096, 0xff),
      Buffer.from([0xff, 0xff, 0xff, 0x7f]),
    ]) {
      await new Promise<void>((resolve) => {
        const s = connect({ host: '127.0.0.1', port: server.port }, () => s.end(junk));
        s.on('error', () => resolve());
        s.on('close', () => resolve());
      });
    }
    await client.set('alive', 'yes');
    expect(text(await server.get('alive'))).toBe('yes');
  });

  it('refuses a client of another run on both sides (RunMismatchError), at once, and keeps serving', async () => {
    const refused: CommError[] = [];
    const opts = { host: '127.0.0.1', port: 0, secret: 'same', timeoutMs: 30_000 };
    const onConnectionError = (e: CommError) => refused.push(e);
    const server = await TCPStore.create({ ...opts, runId: 'run-a', isServer: true, onConnectionError });
    opened.push(server);
    const other = TCPStore.create({ ...opts, port: server.port, runId: 'run-b' });
    await expect(other).rejects.toBeInstanceOf(RunMismatchError);
    await expect(other).rejects.toThrow(/belongs to run "run-a", this rank to run "run-b"/);
    expect(refused.map((e) => e.name)).toEqual(['RunMismatchError']);
    expect(refused[0]?.message).toMatch(/refused a client of run "run-b"/);
    const same = await TCPStore.create({ ...opts, port: server.port, runId: 'run-a' });
    opened.push(same);
    await same.set('k', 'v');
    expect(text(await server.get('k'))).toBe('v');
  });

  it("a restarted attempt's client waits out the earlier attempt's store, and joins its own on the same port", async () => {
    const opts = { host: '127.0.0.1', secret: 'same', timeoutMs: 30_000 };
    const refused: string[] = [];
    const onConnectionError = (e: CommError) => refused.push(e.name);
    const earlier = await TCPStore.create({ ...opts, port: 0, runId: 'job', isServer: true, onConnectionError });
    const port = earlier.port;
    // before: refused at once as another run, and the restart was lost
    const client = TCPStore.create({ ...opts, port, runId: 'job#attempt-1' });
    await new Promise((r) => setTimeout(r, 300));
    await earlier.close();
    // the winding-down attempt's store refused it without a warning's error class
    expect(refused.length > 0 && refused.every((name) => name === 'EarlierAttemptError')).toBe(true);
    const server = await TCPStore.create({ ...opts, port, runId: 'job#attempt-1', isServer: true });
    opened.push(server, await client);
    await (await client).set('k', 'v');
    expect(text(await server.get('k'))).toBe('v');
    // an earlier attempt's rank reaching the later store is stale: refused at once
    await expect(TCPStore.create({ ...opts, port, runId: 'job' })).rejects.toBeInstanceOf(RunMismatchError);
  });

  it("a later attempt marks the earlier attempt's store only once it has proved the secret", async () => {
    const opts = { host: '127.0.0.1', timeoutMs: 1_500 };
    const earlier = await TCPStore.create({ ...opts, port: 0, secret: 's', runId: 'job', isServer: true });
    opened.push(earlier);
    const port = earlier.port;
    const stranger = TCPStore.create({ ...opts, port, secret: 'wrong', runId: 'job#attempt-1' });
    await expect(stranger).rejects.toBeInstanceOf(AuthError);
    expect(await earlier.check([LATER_ATTEMPT_KEY])).toBe(false);
    const restarted = TCPStore.create({ ...opts, port, secret: 's', runId: 'job#attempt-1' });
    await expect(restarted).rejects.toBeInstanceOf(EarlierAttemptError);
    expect(decodeText(await earlier.get(LATER_ATTEMPT_KEY))).toBe('job#attempt-1');
  });

  it('a second server on a port in use fails at once with AddressInUseError naming the port', async () => {
    const [server] = await tcpPair();
    const second = TCPStore.create({ host: '127.0.0.1', port: server.port, secret: 's3', isServer: true });
    await expect(second).rejects.toBeInstanceOf(AddressInUseError);
    await expect(second).rejects.toThrow(`port ${server.port} is in use`);
  });

  // probe AG: rank 0 given another host's MASTER_ADDR failed with a plain `listen EADDRNOTAVAIL`
  it("a server on an address not this machine's: InvalidArgumentError naming MASTER_ADDR", async () => {
    const store = TCPStore.create({ host: '192.0.2.1', port: 0, secret: 's', isServer: true, timeoutMs: 5_000 });
    await expect(store).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(store).rejects.toThrow(/cannot listen on 192\.0\.2\.1:0 \(EADDRNOTAVAIL\): MASTER_ADDR must be/);
  });

  it('refuses a port that cannot exist before trying to connect', async () => {
    for (const port of [-1, 65536, 1.5]) {
      const store = TCPStore.create({ host: '127.0.0.1', port, secret: 's', timeoutMs: 30_000 });
      await expect(store).rejects.toThrow(`port must be an integer in [0, 65535], got ${port}`);
    }
  });

  it('binds only the address it is given', async () => {
    const [server] = await tcpPair();
    const addr = (server.server as unknown as { server: { address(): { address: string } } }).server.address();
    expect(addr.address).toBe('127.0.0.1');
  });
});

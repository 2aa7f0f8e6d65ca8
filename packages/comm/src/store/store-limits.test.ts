import { afterEach, describe, expect, it } from 'vitest';
import { InvalidArgumentError, ProtocolError, TCPStore } from '../index.js';
import { decodeText } from './store.js';
import { type BodyReader, type BodyWriter, MAX_KEY_BYTES, MAX_VALUE_BYTES, StoreCmd } from './tcp-store-codec.js';

const opened: TCPStore[] = [];
afterEach(async () => {
  for (const s of opened.splice(0).reverse()) await s.close();
});

async function tcpPair(): Promise<[TCPStore, TCPStore]> {
  const server = await TCPStore.create({ host: '127.0.0.1', port: 0, secret: 's', isServer: true, timeoutMs: 5000 });
  const client = await TCPStore.create({ host: '127.0.0.1', port: server.port, secret: 's', timeoutMs: 5000 });
  opened.push(server, client);
  return [server, client];
}

/** The connection still carries requests both ways. */
async function stillServes(a: TCPStore, b: TCPStore): Promise<void> {
  await a.set('alive', 'yes');
  expect(decodeText(await b.get('alive'))).toBe('yes');
}

describe('TCPStore limits: refused with a typed error, the connection kept', () => {
  it('a value over 64 MiB or a key over 4096 bytes: InvalidArgumentError naming the limit', async () => {
    // before: the request went out, the server destroyed the connection and every later call
    // raised PeerLostError "is rank 0 alive?"
    const [server, client] = await tcpPair();
    const big = client.set('big', new Uint8Array(MAX_VALUE_BYTES + 1));
    await expect(big).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(big).rejects.toThrow(/67108865 bytes exceeds the TCPStore's 67108864 \(64 MiB\)/);
    const longKey = 'k'.repeat(MAX_KEY_BYTES + 1);
    await expect(client.set(longKey, 'v')).rejects.toThrow(/key of 4097 bytes exceeds the TCPStore's 4096/);
    await expect(client.get(longKey)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(client.compareSet('c', '', new Uint8Array(MAX_VALUE_BYTES + 1))).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    await stillServes(client, server);
    // 64 MiB itself is allowed
    await client.set('max', new Uint8Array(MAX_VALUE_BYTES));
    expect((await server.get('max')).length).toBe(MAX_VALUE_BYTES);
  }, 60_000);

  it('a request the server cannot parse: an error reply (ProtocolError), not a lost connection', async () => {
    const [server, client] = await tcpPair();
    // the client's private request() writes fields unchecked, as an older client would
    type Request = (cmd: number, fill: (w: BodyWriter) => void, what: string) => Promise<BodyReader>;
    const request = (client as unknown as { request: Request }).request.bind(client);
    const longKey = request(StoreCmd.Set, (w) => w.str('k'.repeat(MAX_KEY_BYTES + 1)).str('v'), 'set');
    await expect(longKey).rejects.toBeInstanceOf(ProtocolError);
    await expect(request(99, () => {}, 'unknown')).rejects.toThrow(/unknown command 99/);
    await stillServes(client, server);
  }, 30_000);
});

import { connect, createServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AuthError, RunMismatchError } from '../errors.js';
import { clientHandshake, Purpose } from './handshake.js';
import { PeerMesh } from './peer-mesh.js';

const meshes: PeerMesh[] = [];
afterEach(async () => {
  for (const m of meshes.splice(0)) await m.close();
});

/** A client's side of the handshake, as rank 1. */
const hello = (secret: string, runId: string) => ({
  secret,
  runId,
  purpose: Purpose.Peer,
  rank: 1,
  timeoutMs: 2000,
  what: 'test',
});

function dial(where: { host: string; port: number } | { path: string }): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(where, () => resolve(s));
    s.once('error', reject);
  });
}

async function listening(): Promise<{ mesh: PeerMesh; addr: Awaited<ReturnType<PeerMesh['listen']>> }> {
  const mesh = new PeerMesh({ rank: 0, worldSize: 2, secret: 'right', runId: 'run-a', hostId: 'h', forceTcp: false });
  meshes.push(mesh);
  return { mesh, addr: await mesh.listen('127.0.0.1') };
}

describe('peer handshake', () => {
  it('a client with the wrong secret gets AuthError and the listener refuses it', async () => {
    const { mesh, addr } = await listening();
    for (const where of [{ host: '127.0.0.1', port: addr.port }, { path: addr.uds as string }]) {
      const sock = await dial(where);
      await expect(clientHandshake(sock, hello('wrong', 'run-a'))).rejects.toBeInstanceOf(AuthError);
    }
    await vi.waitFor(() => expect(mesh.refused).toBe(2), { timeout: 2000 });
  });

  it('a peer of another run is refused with RunMismatchError on both sides, even with the right secret', async () => {
    const { mesh, addr } = await listening();
    const refusals: string[] = [];
    mesh.onConnectionError = (e) => refusals.push(e.name);
    for (const where of [{ host: '127.0.0.1', port: addr.port }, { path: addr.uds as string }]) {
      const sock = await dial(where);
      const other = clientHandshake(sock, hello('right', 'run-b'));
      await expect(other).rejects.toBeInstanceOf(RunMismatchError);
      await expect(other).rejects.toThrow(/belongs to run "run-a", this rank to run "run-b"/);
    }
    await vi.waitFor(() => expect(refusals).toEqual(['RunMismatchError', 'RunMismatchError']), { timeout: 2000 });
  });

  it('the right secret is accepted; a second claim to the same rank is refused', async () => {
    const { mesh, addr } = await listening();
    const ok = await dial({ host: '127.0.0.1', port: addr.port });
    await clientHandshake(ok, hello('right', 'run-a'));
    const dup = await dial({ host: '127.0.0.1', port: addr.port });
    await clientHandshake(dup, hello('right', 'run-a')).catch(() => {});
    await new Promise<void>((resolve) => (dup.destroyed ? resolve() : dup.on('close', () => resolve())));
    await vi.waitFor(() => expect(mesh.refused).toBe(1), { timeout: 2000 });
    ok.destroy();
  });

  it('a server without the secret is detected by the client (mutual authentication)', async () => {
    const { addr } = await listening();
    const sock = await dial({ host: '127.0.0.1', port: addr.port });
    await expect(clientHandshake(sock, hello('other', 'run-a'))).rejects.toThrow(/server does not know/);
  });

  // review: a later attempt's challenge ("DDPL") carries no server proof; accepting after it trusted an impostor
  it('a server that challenges as an earlier attempt (no proof of its own) and then accepts is refused', async () => {
    const impostor = createServer((sock) => {
      sock.once('data', () => {
        sock.write(Buffer.concat([Buffer.from('DDPL', 'latin1'), Buffer.alloc(16, 7)]));
        sock.once('data', () => sock.end(Buffer.from([1])));
      });
    });
    await new Promise<void>((resolve) => impostor.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = impostor.address() as { port: number };
      const sock = await dial({ host: '127.0.0.1', port });
      await expect(clientHandshake(sock, hello('right', 'run-a#attempt-1'))).rejects.toBeInstanceOf(AuthError);
    } finally {
      await new Promise((resolve) => impostor.close(resolve));
    }
  });
});

import { unlinkSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { CommError } from '../errors.js';
import { Purpose, serverHandshake } from './handshake.js';
import type { MeshOptions } from './peer-mesh.js';
import { listenOn, type PeerAddress } from './socket-io.js';
import { isSocketFile, unixSocketAddress } from './unix-socket.js';

/**
 * The mesh's listeners (TCP, and a Unix socket unless DDP_TRANSPORT=tcp): each connection
 * must authenticate as a peer of this run before `adopt` gets it; one that does not, or that
 * `adopt` refuses by throwing, is closed and reported to `refuse`.
 */
export class PeerListener {
  private readonly servers: Server[] = [];
  private udsPath: string | null = null;
  /** Connections refused or closed for bad bytes (for tests and diagnostics). */
  refused = 0;

  constructor(
    private readonly opts: MeshOptions,
    private readonly adopt: (peerRank: number, sock: Socket, leftover: Uint8Array[]) => void,
    private readonly refuse: (err: CommError) => void,
  ) {}

  /** Listens on bindHost (TCP, free port) and on a fresh Unix socket (unix-socket.ts). */
  async listen(bindHost: string): Promise<PeerAddress> {
    const tcp = createServer((s) => void this.accept(s));
    await listenOn(tcp, { host: bindHost, port: 0 });
    this.servers.push(tcp);
    const addr = tcp.address();
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    let uds: string | null = null;
    if (!this.opts.forceTcp && process.platform !== 'win32') {
      uds = unixSocketAddress();
      const unix = createServer((s) => void this.accept(s));
      await listenOn(unix, { path: uds });
      this.servers.push(unix);
      this.udsPath = uds;
    }
    return { rank: this.opts.rank, host: bindHost, port, uds, hostId: this.opts.hostId };
  }

  private async accept(sock: Socket): Promise<void> {
    sock.on('error', () => {});
    try {
      const { peerRank, leftover } = await serverHandshake(sock, {
        secret: this.opts.secret,
        runId: this.opts.runId,
        purpose: Purpose.Peer,
        timeoutMs: 10_000,
        what: `rank ${this.opts.rank} peer listener`,
        maxRank: this.opts.worldSize - 1,
      });
      this.adopt(peerRank, sock, leftover);
    } catch (e) {
      this.refused++;
      sock.destroy();
      this.refuse(e instanceof CommError ? e : new CommError(String(e)));
    }
  }

  /** Stops listening and removes the Unix socket's file. */
  async close(): Promise<void> {
    await Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    if (this.udsPath && isSocketFile(this.udsPath)) {
      try {
        unlinkSync(this.udsPath);
      } catch {}
    }
  }
}

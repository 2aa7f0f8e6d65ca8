import { createServer } from 'node:net';

/**
 * A port the OS reports free on `host` right now. Another process may take it before rank 0
 * binds it (torchrun has the same race); a restart picks a new one.
 */
export function findFreePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolvePort(port) : reject(new Error(`no port bound on ${host}`))));
    });
  });
}

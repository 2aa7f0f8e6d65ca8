// Builds the addon when this machine can (Linux, a C++ compiler, Node's headers); otherwise
// says why and succeeds: @ddp/comm then uses Unix-domain sockets between local ranks.
import { spawnSync } from 'node:child_process';

const skip = (why) => {
  console.log(`@ddp/shm: not built (${why}); ranks on one host will talk over Unix sockets`);
  process.exit(0);
};
if (process.platform !== 'linux') skip(`futexes are Linux-only, this is ${process.platform}`);
const r = spawnSync('node-gyp', ['rebuild'], { stdio: 'inherit', shell: process.platform === 'win32' });
if (r.error) skip(`node-gyp: ${r.error.message}`);
if (r.status !== 0) skip(`node-gyp exited with ${r.status}`);

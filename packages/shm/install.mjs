// Builds the addon when this machine can (Linux, a C++ compiler, Node's headers); otherwise
// says why and succeeds: @ddp/comm then uses Unix-domain sockets between local ranks.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const skip = (why) => {
  console.log(`@ddp/shm: not built (${why}); ranks on one host will talk over Unix sockets`);
  // What loadSharedMemory() tells apart from "this script never ran" (pnpm 10's default).
  mkdirSync('build', { recursive: true });
  writeFileSync('build/not-built.txt', `${why}\n`);
  process.exit(0);
};
if (process.platform !== 'linux') skip(`futexes are Linux-only, this is ${process.platform}`);
// Node's own headers when they were installed beside it (distribution packages, official
// tarballs): then node-gyp needs no download
const prefix = dirname(dirname(process.execPath));
const local = existsSync(join(prefix, 'include', 'node', 'node.h')) && !process.env.npm_config_nodedir;
const r = spawnSync('node-gyp', ['rebuild', '--loglevel=warn', ...(local ? [`--nodedir=${prefix}`] : [])], { stdio: 'inherit' });
if (r.error) skip(`node-gyp: ${r.error.message}`);
if (r.status !== 0) skip(`node-gyp exited with ${r.status}`);

// Builds the addon when this machine has Open MPI's development files (mpicc), a C++ compiler and
// Node's headers; otherwise says why and succeeds: initProcessGroup({ backend: 'mpi' }) then
// raises an error saying so, and every other backend works as before.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const skip = (why) => {
  console.log(`@ddp/mpi: not built (${why}); the 'mpi' backend is unavailable (apt-get install libopenmpi-dev openmpi-bin)`);
  mkdirSync('build', { recursive: true });
  writeFileSync('build/not-built.txt', `${why}\n`);
  process.exit(0);
};
if (spawnSync('mpicc', ['--showme:version']).status !== 0) skip('no mpicc: Open MPI development files are missing');
const prefix = dirname(dirname(process.execPath));
const local = existsSync(join(prefix, 'include', 'node', 'node_api.h')) && !process.env.npm_config_nodedir;
const r = spawnSync('node-gyp', ['rebuild', '--loglevel=warn', ...(local ? [`--nodedir=${prefix}`] : [])], { stdio: 'inherit' });
if (r.error) skip(`node-gyp: ${r.error.message}`);
if (r.status !== 0) skip(`node-gyp exited with ${r.status}`);

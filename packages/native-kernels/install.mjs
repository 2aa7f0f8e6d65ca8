// Builds the addon when this machine can (a C++ compiler, OpenBLAS's and oneDNN's headers and
// libraries, Node's headers); otherwise says why, leaves the reason in build/not-built.txt for the
// start-up line of @ddp/tensor, and succeeds: tfjs-wasm's own kernels then run.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const here = dirname(new URL(import.meta.url).pathname);
const skip = (why) => {
  mkdirSync(join(here, 'build'), { recursive: true });
  writeFileSync(join(here, 'build', 'not-built.txt'), `${why}\n`);
  console.log(`@ddp/native-kernels: not built (${why}); tfjs-wasm's kernels will run`);
  process.exit(0);
};
// each library the addon links, probed on its own so that the reason names the missing package
const libraries = [
  ['libopenblas-dev', '#include <cblas.h>\nint main() { openblas_set_num_threads(1); }\n', '-lopenblas'],
  ['libdnnl-dev', '#include <dnnl.hpp>\nint main() { dnnl::engine e(dnnl::engine::kind::cpu, 0); }\n', '-ldnnl'],
];
for (const [pkg, source, lib] of libraries) {
  const probe = spawnSync('c++', ['-x', 'c++', '-', lib, '-o', '/dev/null'], { input: source, encoding: 'utf8' });
  if (probe.error) skip(`no C++ compiler: ${probe.error.message}`);
  if (probe.status !== 0) skip(`${pkg} missing`);
}
// Node's own headers when they were installed beside it (distribution packages, official
// tarballs): then node-gyp needs no download
const prefix = dirname(dirname(process.execPath));
const local = existsSync(join(prefix, 'include', 'node', 'node.h')) && !process.env.npm_config_nodedir;
const r = spawnSync('node-gyp', ['rebuild', '--loglevel=warn', ...(local ? [`--nodedir=${prefix}`] : [])], { stdio: 'inherit' });
if (r.error) skip(`node-gyp: ${r.error.message}`);
if (r.status !== 0) skip(`node-gyp exited with ${r.status}`);

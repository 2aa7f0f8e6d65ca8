import { runWorld, explain } from './spawn-world.js';
const n = Number(process.argv[2] ?? 2);
const r = await runWorld({ worldSize: n, script: 'tmp-perf.child.ts', args: process.argv.slice(3), timeoutMs: 200000, nodeArgs: process.env.PROF ? ['--cpu-prof', '--cpu-prof-dir=/tmp/prof'] : [] });
for (const x of r[0].results) console.log(JSON.stringify(x));
console.log(explain(r));

import { runWorld, explain } from './spawn-world.js';
const n = Number(process.argv[2] ?? 2);
const t = Date.now();
const r = await runWorld({ worldSize: n, script: process.env.SCRIPT ?? 'collectives.child.ts', args: process.argv.slice(3), timeoutMs: 100000 });
console.log(Date.now() - t, 'ms', JSON.stringify(r.map(o => [o.code, o.results])), explain(r));

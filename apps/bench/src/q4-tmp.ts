import { destroyProcessGroup, initProcessGroup, sharedArray } from '@ddp/comm';
const pg = await initProcessGroup({ timeoutMs: 60_000 });
const bytes = Number(process.env.BYTES ?? 4096);
const buf = sharedArray(Float32Array, bytes / 4).fill(1);
const ts: number[] = [];
const cpu0 = process.cpuUsage();
for (let i = 0; i < 40; i++) { const t0 = performance.now(); await pg.allReduce(buf).wait(); ts.push(performance.now() - t0); }
if (pg.rank === 0) console.log(ts.map((t) => t.toFixed(0)).join(' '));
const cpu = process.cpuUsage(cpu0);
if (pg.rank === 0) console.log('cpu ms', (cpu.user + cpu.system) / 1000, 'sys', cpu.system/1000);
await destroyProcessGroup();

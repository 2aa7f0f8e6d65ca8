import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { join } from '../index.js';
import { Counter } from './counter.js';

// argv: <mode> where mode is 'count' or 'throw'; rank r gets 5 + r inputs
const mode = process.argv[2] ?? 'count';
const group = await initProcessGroup({ timeoutMs: 20_000 });
const counter = new Counter(group);
const inputs = 5 + group.rank;
let seen = 0;
let threw = '';
try {
  await join(
    [counter],
    async () => {
      for (let i = 0; i < inputs; i++) {
        seen++;
        await counter.step();
      }
    },
    { syncMaxCount: true, throwOnEarlyTermination: mode === 'throw' },
  );
} catch (e) {
  threw = (e as Error).name;
}
const result = {
  rank: group.rank,
  seen,
  count: counter.count,
  maxCount: counter.maxCount,
  active: counter.active,
  threw,
};
console.log(`RESULT ${JSON.stringify(result)}`);
await destroyProcessGroup();

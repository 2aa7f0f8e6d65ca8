import { destroyProcessGroup, duplicateGroup, initProcessGroup, newGroup } from '../index.js';

/**
 * newGroup when a rank skips a group it is not in ('skip': rank 2 skips [0, 1], then every
 * member makes [0, 2]), or a member never makes it ('missing': rank 0 skips [0, 1]; 'absent':
 * rank 1 does), or the lowest member destroys the world right after making it, before the
 * others start to ('late': [0, 1, 2], the others 500 ms late), or rank 0, which hosts the store, exits
 * while the others wait for it to make [0, 1, 2] ('gone'), or rank 1 makes [0, 1] where the others
 * make [0, 1, 2] ('split'), or [0, 1] is destroyed and the world used after ('destroy'). Prints the all-reduced values
 * per group, or the error. 3 ranks. Args: scenario
 */
const scenario = process.argv[2];
const world = await initProcessGroup({ timeoutMs: 20_000 });
const result: {
  rank: number;
  a?: number;
  b?: number;
  duplicated?: unknown;
  error?: { name: string; message: string };
} = {
  rank: world.rank,
};
try {
  if (scenario === 'late') {
    if (world.rank === 0) {
      await newGroup([0, 1, 2]);
      await destroyProcessGroup();
      process.exit(0);
    }
    await new Promise((r) => setTimeout(r, 500));
    result.a = (await newGroup([0, 1, 2]))?.size;
  }
  if (scenario === 'destroy') {
    const group = await newGroup([0, 1]);
    // null on rank 2: duplicating it is refused, typed (was a TypeError reading its ranks; probe AR)
    if (group === null) result.duplicated = await duplicateGroup(group as never).catch((e: Error) => e.message);
    await destroyProcessGroup(group); // null on rank 2: nothing to end
    const buf = Float32Array.of(world.rank + 1);
    await world.allReduce(buf).wait(); // the world goes on
    result.a = buf[0];
    group?.allReduce(buf); // ended: raises
  }
  if (scenario === 'split')
    result.a = (await newGroup(world.rank === 1 ? [0, 1] : [0, 1, 2], { timeoutMs: 3_000 }))?.size;
  if (scenario === 'gone') {
    if (world.rank === 0) setTimeout(() => process.exit(0), 500);
    else await newGroup([0, 1, 2], { timeoutMs: 15_000 });
  }
  const skipper = { skip: 2, missing: 0, absent: 1 }[scenario];
  const a = skipper === undefined || world.rank === skipper ? null : await newGroup([0, 1], { timeoutMs: 3_000 });
  // the store (rank 0's) stays up until the members waiting for the skipper time out
  if (world.rank === skipper && scenario !== 'skip') await new Promise((r) => setTimeout(r, 4_000));
  const b = scenario === 'skip' ? await newGroup([0, 2]) : null;
  if (a && scenario === 'skip') {
    const buf = Float32Array.of(world.rank + 1);
    await a.allReduce(buf).wait();
    result.a = buf[0];
  }
  if (b) {
    const buf = Float32Array.of(world.rank === 2 ? 1000 : 10);
    await b.allReduce(buf).wait();
    result.b = buf[0];
  }
} catch (e) {
  result.error = { name: (e as Error).name, message: (e as Error).message };
}
// the store (rank 0's) stays up until every rank's newGroup failed
if (scenario === 'split') await world.barrier().wait();
console.log(`RESULT ${JSON.stringify(result)}`);
await destroyProcessGroup();

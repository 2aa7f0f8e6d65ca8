import { destroyProcessGroup, initProcessGroup, newGroup } from '../index.js';

/**
 * A world of 2 whose timeout is argv[2] ms ('Infinity' or 2^31): rank 1 arrives 300 ms late at
 * initProcessGroup, at an allReduce, and at a newGroup of both, so rank 0 waits in the store,
 * in the connect and in the collective. Prints the all-reduced values, or the error.
 */
const timeoutMs = Number(process.argv[2]);
const late = () => new Promise((r) => setTimeout(r, Number(process.env.RANK) === 1 ? 300 : 0));
const result: { sums: number[]; error?: string } = { sums: [] };
try {
  await late();
  const world = await initProcessGroup({ timeoutMs });
  await late();
  const a = Float32Array.of(world.rank + 1);
  await world.allReduce(a).wait();
  await late();
  const g = await newGroup([0, 1], { timeoutMs });
  await late();
  const b = Float32Array.of(10);
  await g?.allReduce(b).wait();
  result.sums = [a[0], b[0]];
} catch (e) {
  result.error = `${(e as Error).name}: ${(e as Error).message}`;
}
console.log(`RESULT ${JSON.stringify(result)}`);
await destroyProcessGroup();

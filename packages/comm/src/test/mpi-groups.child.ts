import {
  destroyProcessGroup,
  duplicateGroup,
  initProcessGroup,
  newGroup,
  newSubgroupsByEnumeration,
} from '../index.js';

/**
 * Mistakes the mpi backend took silently. 'orders' (3 ranks): rank 0 makes [0, 1] then [0, 2],
 * the others [0, 2] then [0, 1]. 'tags' (2 ranks): a negative tag, then a good exchange. 'dtypes'
 * (2 ranks): an int32 send met by a float32 receive of the same size. 'duplicate' (4 ranks): each
 * half's group [0, 1] / [2, 3] duplicated by its members only, then sums on it and on the world.
 * 'interleaved' (2 ranks): a sum on a duplicate of the world and one on the world, issued in
 * opposite orders by the two ranks (a checkpoint's background collectives beside training).
 * Prints each outcome.
 */
const scenario = process.argv[2];
const timeoutMs = scenario === 'dtypes' || scenario === 'interleaved' ? 5_000 : 30_000;
const g = await initProcessGroup({ backend: 'mpi', timeoutMs });
const outcome = async (fn: () => Promise<unknown>) => {
  try {
    return { value: await fn() };
  } catch (e) {
    return { error: `${(e as Error).name}: ${(e as Error).message}` };
  }
};
const result: Record<string, unknown> = { rank: g.rank };
if (scenario === 'orders') {
  const lists =
    g.rank === 0
      ? [
          [0, 1],
          [0, 2],
        ]
      : [
          [0, 2],
          [0, 1],
        ];
  for (const [i, list] of lists.entries())
    result[`group${i}`] = await outcome(async () => (await newGroup(list)) !== null);
} else if (scenario === 'duplicate') {
  const [half] = await newSubgroupsByEnumeration([
    [0, 1],
    [2, 3],
  ]);
  result.sums = await outcome(async () => {
    const copy = await duplicateGroup(half!);
    const sums = [Float32Array.of(g.rank + 1), Float32Array.of(g.rank + 1)];
    await copy.allReduce(sums[0]).wait();
    await g.allReduce(sums[1]).wait();
    return sums.map((b) => b[0]);
  });
} else if (scenario === 'interleaved') {
  const copy = await duplicateGroup(g);
  const [onCopy, onWorld] = [Float32Array.of(g.rank + 1), Float32Array.of(10 * (g.rank + 1))];
  const issue = [() => copy.allReduce(onCopy), () => g.allReduce(onWorld)];
  result.sums = await outcome(async () => {
    await Promise.all((g.rank === 0 ? issue : issue.reverse()).map((start) => start().wait()));
    return [onCopy[0], onWorld[0]];
  });
} else if (scenario === 'tags') {
  const peer = 1 - g.rank;
  result.negative = await outcome(() =>
    (g.rank === 0 ? g.send(Float32Array.of(1), peer, -1) : g.recv(new Float32Array(1), peer, -1)).wait(),
  );
  const buf = Float32Array.of(g.rank === 0 ? 5 : 0);
  await (g.rank === 0 ? g.send(buf, peer, 3) : g.recv(buf, peer, 3)).wait();
  result.received = buf[0];
} else {
  result.received = await outcome(async () => {
    if (g.rank === 0) return void (await g.send(Int32Array.of(7, 7), 1).wait());
    const buf = new Float32Array(2);
    await g.recv(buf, 0).wait();
    return Array.from(buf);
  });
}
console.log(`RESULT ${JSON.stringify(result)}`);
if (scenario !== 'dtypes') await destroyProcessGroup();
// rank 0's send completed, rank 1's receive timed out: neither can finalize. Rank 0 stays until mpirun
// ends it (rank 1 exits after its timeout): exiting first, it had the job ended before rank 1 reported
else if (g.rank === 0) await new Promise((resolve) => setTimeout(resolve, 30_000));

// A world of checkpoint.multiprocess.test.ts's fit checks: a linear layer and a batch norm whose
// running statistics are tracked or not, or whose features differ (no affine parameters, so the
// sharded layout stays the same). `save` writes one checkpoint of each kind under `dir` (one
// of them with AsyncCheckpointer, one whose manifest then claims another shard size); `load`
// loads each into the model named beside it. Prints RESULT { rank, outcomes } (error or running mean).
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, BatchNorm1d, Generator, Linear, parseSealedJson, Sequential, SGD, sealJson } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { AsyncCheckpointer, type FSDPManifest, fullyShard, loadFSDPCheckpoint, saveFSDPCheckpoint } from '../index.js';

const { dir, phase } = JSON.parse(process.argv[2]) as { dir: string; phase: 'save' | 'load' };
const group = await initProcessGroup({ timeoutMs: 30_000 });

const kinds = {
  tracked: () => new BatchNorm1d(3, { affine: false }),
  untracked: () => new BatchNorm1d(3, { affine: false, trackRunningStats: false }),
  wide: () => new BatchNorm1d(5, { affine: false }),
};
type Kind = keyof typeof kinds;
/** The model of `kind`, sharded; the saved ones' running mean is 1, 2, 3 (not the initial zeros, so a load shows). */
const sharded = (kind: Kind, saved = false) => {
  const model = new Sequential(new Linear(4, 3, { generator: new Generator(1) }), kinds[kind]());
  const mean = new Map(model.namedBuffers()).get('1.running_mean');
  if (mean && saved) mean.data = tf.tensor(Array.from({ length: mean.size }, (_, i) => i + 1));
  return { model, root: fullyShard(model) };
};

if (phase === 'save') {
  const saves: [string, Kind][] = [
    ['untracked', 'untracked'],
    ['tracked', 'tracked'],
    ['narrow', 'tracked'],
    ['tampered', 'tracked'],
  ];
  for (const [name, kind] of saves) {
    const { root } = sharded(kind, true);
    await saveFSDPCheckpoint(join(dir, name), { root, optimizer: new Adam(root.parameters()), step: 1 });
  }
  const { root } = sharded('untracked', true);
  const background = new AsyncCheckpointer(root);
  const { done } = await background.save(join(dir, 'async-untracked'), {
    optimizer: new Adam(root.parameters()),
    step: 1,
  });
  await done;
  if (group.rank === 0) {
    const entry = join(dir, 'tampered', 'latest');
    // a sealed manifest whose world size (so each parameter's chunk) disagrees with its files (its checksum
    // alone cannot tell)
    const path = join(entry, 'manifest.json');
    const { value } = parseSealedJson(await readFile(path, 'utf8'), path);
    const manifest = value as unknown as FSDPManifest;
    manifest.worldSize += 1;
    await writeFile(path, sealJson({ ...manifest }));
  }
  console.log(`RESULT ${JSON.stringify({ rank: group.rank, outcomes: {} })}`);
} else {
  const loads: [string, string, Kind][] = [
    ['a buffer missing', 'untracked', 'tracked'],
    ['a buffer missing (async save)', 'async-untracked', 'tracked'],
    ['a buffer unexpected', 'tracked', 'untracked'],
    ['a buffer of another shape', 'narrow', 'wide'],
    ['a shard of another size than the manifest', 'tampered', 'tracked'],
    ['fits', 'tracked', 'tracked'],
  ];
  const outcomes: Record<string, string | number[]> = {};
  // were: Adam's moments loaded into SGD, and a scheduler (passed through an untyped object) ignored
  const refused = async (what: string, load: () => Promise<unknown>) => {
    outcomes[what] = await load().then(
      () => 'loaded',
      (e: Error) => `${e.name}: ${e.message}`,
    );
  };
  const { root: other } = sharded('tracked');
  await refused('an Adam checkpoint into SGD', () =>
    loadFSDPCheckpoint(join(dir, 'tracked'), { root: other, optimizer: new SGD(other.parameters(), { lr: 0.1 }) }),
  );
  const withScheduler: object = { root: other, scheduler: {} };
  await refused('a scheduler', () => loadFSDPCheckpoint(join(dir, 'tracked'), withScheduler as { root: typeof other }));
  for (const [what, saved, kind] of loads) {
    const { model, root } = sharded(kind);
    try {
      await loadFSDPCheckpoint(join(dir, saved), { root });
      outcomes[what] = Array.from(new Map(model.namedBuffers()).get('1.running_mean')?.data.dataSync() ?? []);
    } catch (e) {
      outcomes[what] = `${(e as Error).name}: ${(e as Error).message}`;
    }
  }
  console.log(`RESULT ${JSON.stringify({ rank: group.rank, outcomes })}`);
}
await destroyProcessGroup();

import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, Linear, SGD } from '@ddp/nn';
import { saveShardedCheckpoint, ZeroRedundancyOptimizer } from '@ddp/zero';
import { afterEach, expect, it } from 'vitest';
import { saveFSDPCheckpoint } from './checkpoint-save.js';
import { fullyShard } from './fully-shard.js';

let dir = '';
afterEach(() => rm(dir, { recursive: true, force: true }));

// probe X: a script's last save not awaited, then destroyProcessGroup: its collectives were cut, no entry
it.each(['saveFSDPCheckpoint', 'saveShardedCheckpoint'])(
  '%s not awaited before destroyProcessGroup: the entry is committed',
  async (save) => {
    dir = await mkdtemp(join(tmpdir(), 'save-before-destroy-'));
    await initProcessGroup({ rank: 0, worldSize: 1 });
    if (save === 'saveFSDPCheckpoint') {
      const root = fullyShard(new Linear(3, 2));
      void saveFSDPCheckpoint(dir, { root, optimizer: new SGD(root.parameters(), { lr: 0.1 }), step: 1 });
    } else {
      const model = new Linear(3, 2);
      const optimizer = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.1 });
      void saveShardedCheckpoint(dir, { model, optimizer, step: 1 });
    }
    await destroyProcessGroup();
    expect((await readdir(dir)).filter((n) => n.includes('-step-'))).toHaveLength(1);
  },
);

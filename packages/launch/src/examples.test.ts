import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseCommandLine } from './program.js';
import { rankScript } from './test/harness.js';

/** The repository's cluster recipes (examples/cluster) parse under the variables their scheduler sets. */
const example = (name: string): string =>
  readFileSync(new URL(`../../../examples/cluster/${name}`, import.meta.url), 'utf8');

/** ddp-run's arguments in a recipe's command, with the script swapped for the test fixture. */
function ddpRunArgs(words: string[]): string[] {
  const at = words.findIndex((w) => /(^|\/)ddp-run$/.test(w));
  // ddp-run itself: npx or npm exec in front exits on the scheduler's SIGTERM without passing it on
  expect(words.slice(0, at + 1).filter((w) => /^(npx|npm|pnpm|yarn)$/.test(w))).toEqual([]);
  return words.slice(at + 1).map((a) => (a === 'train.ts' ? rankScript : a));
}

const yamlCommand = (text: string): string[] =>
  /command: \[(.*)\]/
    .exec(text)![1]
    .split(',')
    .map((w) => w.trim().replace(/^"|"$/g, ''));

describe('examples/cluster', () => {
  it.each<[string, string[], Record<string, string>, object]>([
    [
      'trainjob.yaml (Kubeflow Trainer v2)',
      yamlCommand(example('trainjob.yaml')),
      {
        KUBERNETES_SERVICE_HOST: 'k',
        PET_NNODES: '2',
        PET_NPROC_PER_NODE: '2',
        PET_NODE_RANK: '1',
        PET_MASTER_ADDR: 'ddp-node-0-0.ddp',
        PET_MASTER_PORT: '29400',
      },
      { nnodes: 2, nodeRank: 1, nprocPerNode: 2, masterAddr: 'ddp-node-0-0.ddp', rdzvId: 'kubeflow-ddp-node-0-0.ddp' },
    ],
    [
      'pytorchjob.yaml (Kubeflow PyTorchJob)',
      yamlCommand(example('pytorchjob.yaml')),
      { KUBERNETES_SERVICE_HOST: 'k', MASTER_ADDR: 'ddp-master-0', MASTER_PORT: '23456', WORLD_SIZE: '2', RANK: '1' },
      { nnodes: 2, nodeRank: 1, nprocPerNode: 2, masterAddr: 'ddp-master-0', masterPort: 23456 },
    ],
    [
      'slurm.sbatch',
      /^srun .*$/m.exec(example('slurm.sbatch'))![0].split(/\s+/),
      {
        SLURM_JOB_ID: '77',
        SLURM_STEP_ID: '0',
        SLURM_NNODES: '2',
        SLURM_NODEID: '1',
        SLURM_NTASKS: '2',
        SLURM_JOB_NODELIST: 'n1,n2',
      },
      { nnodes: 2, nodeRank: 1, nprocPerNode: 2, masterAddr: 'n1', masterPort: 15077, rdzvId: 'slurm-77.0' },
    ],
  ])('%s', (_what, command, env, want) => {
    const parsed = parseCommandLine(ddpRunArgs(command), env);
    expect(parsed).toMatchObject({ options: { ...want, args: ['--epochs', '3'] } });
  });
});

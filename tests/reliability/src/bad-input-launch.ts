import { planLaunch } from '@ddp/launch';
import type { BadInputCase } from './bad-input.js';

/** Bad-input rows for the launcher: each must name the option it rejects where it can. */
export const LAUNCH_CASES: BadInputCase[] = [
  {
    pkg: 'launch',
    entry: 'planLaunch',
    input: 'nprocPerNode 0',
    expect: 'LaunchConfigError',
    mustName: 'nprocPerNode',
    call: () => planLaunch({ script: 'x.ts', nprocPerNode: 0 }),
  },
  {
    pkg: 'launch',
    entry: 'planLaunch',
    input: 'maxRestarts -1',
    expect: 'LaunchConfigError',
    mustName: 'maxRestarts',
    call: () => planLaunch({ script: 'x.ts', nprocPerNode: 1, maxRestarts: -1 }),
  },
  {
    pkg: 'launch',
    entry: 'planLaunch',
    input: 'script missing',
    expect: 'LaunchConfigError',
    call: () => planLaunch({ script: '', nprocPerNode: 1 }),
  },
  {
    pkg: 'launch',
    entry: 'planLaunch',
    input: 'masterPort 70000',
    expect: 'LaunchConfigError',
    call: () => planLaunch({ script: 'x.ts', nprocPerNode: 1, masterPort: 70000 }),
  },
];

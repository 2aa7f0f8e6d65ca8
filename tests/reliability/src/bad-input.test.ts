import { writeFileSync } from 'node:fs';
import { destroyProcessGroup } from '@ddp/comm';
import { afterAll, describe, expect, it } from 'vitest';
import { attempt, type Outcome } from './bad-input.js';
import { COMM_CASES } from './bad-input-comm.js';
import { CORE_CASES } from './bad-input-core.js';
import { DATA_CASES } from './bad-input-data.js';
import { LAUNCH_CASES } from './bad-input-launch.js';
import { NN_CASES } from './bad-input-nn.js';
import { PARALLEL_CASES } from './bad-input-parallel.js';

// comm first: its getRank row needs a process without a world.
const CASES = [...COMM_CASES, ...CORE_CASES, ...NN_CASES, ...DATA_CASES, ...LAUNCH_CASES, ...PARALLEL_CASES];

/** Bad input at each package's public entry points must raise a typed error (table in RELIABILITY.md). */

const key = (c: (typeof CASES)[number]) => `${c.pkg} ${c.entry}: ${c.input}`;
const seen: Record<string, Outcome & { expect: string }> = {};

describe('bad input at public entry points gets a typed error', () => {
  afterAll(async () => {
    await destroyProcessGroup();
    writeFileSync(new URL('../results/bad-input.json', import.meta.url), `${JSON.stringify(seen, null, 2)}\n`);
  });
  for (const c of CASES) {
    it(`${key(c)} → ${c.expect}`, async () => {
      const o = await attempt(c);
      seen[key(c)] = { ...o, expect: c.expect };
      expect(o.typed, `${o.name}: ${o.message}`).toBe(true);
    });
  }
});

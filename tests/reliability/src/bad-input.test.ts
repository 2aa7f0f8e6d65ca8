import { writeFileSync } from 'node:fs';
import { destroyProcessGroup } from '@ddp/comm';
import { afterAll, describe, expect, it } from 'vitest';
import { attempt, CASES as CORE, type Outcome } from './bad-input.js';
import { PARALLEL_CASES } from './bad-input-parallel.js';

const CASES = [...CORE, ...PARALLEL_CASES];

/**
 * Bad input at each package's public entry points must raise a typed error. Rows listed in
 * KNOWN_UNTYPED do not today (see RELIABILITY.md); they run as expected failures, so a fix
 * shows up as a failing "expected to fail" test and the row moves out of the list.
 */
const KNOWN_UNTYPED = new Set<string>([
  'reducer DistributedDataParallel.create: bucketCapMB -1',
  'reducer DistributedDataParallel.create: a module without parameters',
  'reducer loss.backward (DDP, default options): NaN in the input → NaN gradient',
]);

const key = (c: (typeof CASES)[number]) => `${c.pkg} ${c.entry}: ${c.input}`;
const seen: Record<string, Outcome & { expect: string }> = {};

describe('bad input at public entry points gets a typed error', () => {
  afterAll(async () => {
    await destroyProcessGroup();
    writeFileSync(new URL('../results/bad-input.json', import.meta.url), `${JSON.stringify(seen, null, 2)}\n`);
  });
  for (const c of CASES) {
    const run = KNOWN_UNTYPED.has(key(c)) ? it.fails : it;
    run(`${key(c)} → ${c.expect}`, async () => {
      const o = await attempt(c);
      seen[key(c)] = { ...o, expect: c.expect };
      expect(o.typed, `${o.name}: ${o.message}`).toBe(true);
    });
  }
});

import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

/** What a rank printed when its own code failed after the wasm backend started. */
async function failingRank(mode: 'throw' | 'rejection') {
  const run = await runWorld({
    script: new URL('./test/uncaught.child.ts', import.meta.url),
    nprocs: 1,
    args: [mode],
    allowFailure: true,
  });
  const rank = run.ranks[0];
  return { code: rank.code, stderr: rank.stderr.join('\n') };
}

describe("a rank's uncaught error after the wasm backend started", () => {
  it.each([
    ['throw', 'Error: user error in rank'],
    ['rejection', 'Error: user rejection in rank'],
  ] as const)('%s: stderr is the error and its stack, not the wasm glue', async (mode, error) => {
    const { code, stderr } = await failingRank(mode);
    expect(code).toBe(1);
    expect(stderr).toContain(error);
    expect(stderr).toContain('uncaught.child.ts');
    expect(stderr).not.toContain('WasmBackendModule');
    expect(stderr.length).toBeLessThan(2000);
  });
});

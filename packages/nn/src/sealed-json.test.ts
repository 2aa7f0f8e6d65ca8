import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { readSealedJson, sealJson } from './sealed-json.js';

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ddp-sealed-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

// a reader of version 3 (FSDP's per-parameter layout) must still read the version 2 its users saved before
it('reads every sealed version up to its own; a newer or unknown one is refused, naming the range', async () => {
  const path = join(dir, 'meta.json');
  const write = (version: unknown) => writeFile(path, sealJson({ format: 'f', version, step: 1 }));
  for (const version of [2, 3]) {
    await write(version);
    expect((await readSealedJson(path, 'f', 3)).version).toBe(version);
  }
  for (const version of [4, 0, 2.5, '3']) {
    await write(version);
    await expect(readSealedJson(path, 'f', 3)).rejects.toThrow(/is not a f \(versions 1 to 3\)/);
  }
});

// probe CE: a value holding itself overflowed the stack (a RangeError, nothing written); an undefined array
// element was called "empty"
it('refuses a cycle and an undefined array element, naming where', () => {
  const extra: Record<string, unknown> = { step: 1 };
  extra.self = extra;
  expect(() => sealJson({ extra })).toThrow(/checkpoint metadata: extra\.self holds itself \(a cycle\)/);
  const list: unknown[] = [1];
  list.push(list);
  expect(() => sealJson({ extra: { list } })).toThrow(/extra\.list\[1\] holds itself/);
  expect(() => sealJson({ extra: { v: [1, undefined, 3] } })).toThrow(
    /extra\.v\[1\] is undefined \(it would read back as null\)/,
  );
  // the same object twice, not inside itself, is no cycle
  const shared = { a: 1 };
  expect(() => sealJson({ extra: { x: shared, y: [shared] } })).not.toThrow();
});

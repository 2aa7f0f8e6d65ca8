import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { markdownTable, writeReport } from './index.js';

describe('writeReport', () => {
  it('writes JSON, a Markdown table and a PNG', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'plot-'));
    const rows = [
      { size: 1, gbps: 0.5, impl: 'a' },
      { size: 2, gbps: 1.5, impl: 'a' },
    ];
    const files = await writeReport(dir, 'demo', rows, { chart: { x: 'size', y: 'gbps', series: 'impl' } });
    expect(JSON.parse(await readFile(files[0]!, 'utf8')).rows).toEqual(rows);
    expect(await readFile(files[1]!, 'utf8')).toContain('| 2 | 1.500 | a |');
    const png = await readFile(files[2]!);
    expect(png.subarray(1, 4).toString()).toBe('PNG');
  });

  it('formats an empty table', () => {
    expect(markdownTable([])).toBe('(no rows)\n');
  });
});

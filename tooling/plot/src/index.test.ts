import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { markdownTable, renderLineChart, writeReport } from './index.js';

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

  it('draws one panel per value of `panel`, each with its own y axis', async () => {
    const rows = [
      { step: 1, metric: 'loss', value: 2 },
      { step: 2, metric: 'loss', value: 1 },
      { step: 2, metric: 'top-1 (%)', value: 90 },
    ];
    const height = (png: Buffer) => png.readUInt32BE(20);
    const chart = { x: 'step', y: 'value', series: 'metric' };
    const one = await renderLineChart(rows, chart);
    const two = await renderLineChart(rows, { ...chart, panel: 'metric' });
    expect(height(two)).toBeGreaterThan(height(one));
  });

  it('formats an empty table', () => {
    expect(markdownTable([])).toBe('(no rows)\n');
  });
});

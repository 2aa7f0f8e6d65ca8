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
    expect(JSON.parse(await readFile(files[0], 'utf8')).rows).toEqual(rows);
    expect(await readFile(files[1], 'utf8')).toContain('| 2 | 1.500 | a |');
    const png = await readFile(files[2]);
    expect(png.subarray(1, 4).toString()).toBe('PNG');
  });

  it('draws one panel per value of `panel`, each with its own y axis', async () => {
    const rows = [
      { step: 1, value: 0.5, metric: 'loss', impl: 'a' },
      { step: 2, value: 0.4, metric: 'loss', impl: 'a' },
      { step: 1, value: 900, metric: 'samples/s', impl: 'a' },
      { step: 2, value: 950, metric: 'samples/s', impl: 'a' },
    ];
    const one = await renderLineChart(rows, { x: 'step', y: 'value', series: 'impl' });
    const panels = await renderLineChart(rows, { x: 'step', y: 'value', series: 'impl', panel: 'metric' });
    expect(panels.subarray(1, 4).toString()).toBe('PNG');
    // PNG height (IHDR, bytes 20–23): two stacked 200-px panels outgrow the single 360-px chart
    expect(panels.readUInt32BE(20)).toBeGreaterThan(one.readUInt32BE(20) + 40);
  });

  it('formats an empty table', () => {
    expect(markdownTable([])).toBe('(no rows)\n');
  });
});

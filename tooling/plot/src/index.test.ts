import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lineChartSpec, markdownTable, renderLineChart, writeReport } from './index.js';

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

  it('ticks integer x values (world sizes) at integers only, titles axes with their units, draws fractions as %', () => {
    const rows = [
      { world: 1, bubble: 0.5, kind: 'a' },
      { world: 2, bubble: 0.25, kind: 'a' },
      { world: 4, bubble: 0.125, kind: 'b' },
    ];
    const chart = { x: 'world', y: 'bubble', series: 'kind', xTitle: 'ranks', yTitle: 'idle (%)', percent: true };
    const spec = JSON.stringify(lineChartSpec(rows, chart));
    expect(spec).toContain('"axis":{"tickMinStep":1,"format":"d"}');
    expect(spec).toContain('"title":"ranks"');
    expect(spec).toContain('"title":"idle (%)","axis":{"format":".0%"}');
    // fractional x: vega's own ticks
    expect(JSON.stringify(lineChartSpec([{ world: 1.5, bubble: 1 }], chart))).not.toContain('tickMinStep');
  });

  it('draws only the rows `where` keeps', () => {
    const rows = [
      { world: 1, ms: 5, kind: 'wall' },
      { world: 1, ms: 9, kind: 'cpu' },
    ];
    const spec = lineChartSpec(rows, { x: 'world', y: 'ms', where: (r) => r.kind === 'wall' });
    expect(JSON.stringify(spec)).not.toContain('"cpu"');
  });

  it('formats an empty table', () => {
    expect(markdownTable([])).toBe('(no rows)\n');
  });
});

import { Resvg } from '@resvg/resvg-js';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as vega from 'vega';
import * as vegaLite from 'vega-lite';

export type Row = Record<string, string | number | boolean | null>;

/**
 * A line chart of `y` against `x`, one line per value of `series`. With `panel`, one panel per
 * value of that field, stacked, each with its own y axis: unlike units never share an axis.
 */
export interface LineChart {
  x: string;
  y: string;
  series?: string;
  panel?: string;
  title?: string;
  logX?: boolean;
  logY?: boolean;
}

/** Renders a line chart to PNG bytes (vega-lite → SVG → resvg). */
export async function renderLineChart(rows: Row[], chart: LineChart): Promise<Buffer> {
  const axis = (field: string, log?: boolean) => ({
    field,
    type: 'quantitative' as const,
    ...(log ? { scale: { type: 'log' as const } } : {}),
  });
  const panels = chart.panel ? new Set(rows.map((r) => r[chart.panel!])).size : 1;
  const spec: vegaLite.TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: chart.title,
    width: 640,
    height: panels > 1 ? 200 : 360,
    // vega annotates the objects it is given: hand it copies.
    data: { values: rows.map((r) => ({ ...r })) },
    mark: { type: 'line', point: true },
    encoding: {
      x: axis(chart.x, chart.logX),
      y: { ...axis(chart.y, chart.logY), ...(chart.panel ? { title: null } : {}) },
      ...(chart.series ? { color: { field: chart.series, type: 'nominal' as const } } : {}),
      ...(chart.panel ? { row: { field: chart.panel, type: 'nominal' as const, title: null } } : {}),
    },
    ...(chart.panel ? { resolve: { scale: { y: 'independent' as const } } } : {}),
    config: { background: 'white' },
  };
  const view = new vega.View(vega.parse(vegaLite.compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return new Resvg(svg, { font: { loadSystemFonts: true } }).render().asPng();
}

/** A GitHub-flavoured Markdown table of the rows, columns in the order of the first row. */
export function markdownTable(rows: Row[]): string {
  if (rows.length === 0) return '(no rows)\n';
  const columns = Object.keys(rows[0]!);
  const cell = (v: Row[string]) => (typeof v === 'number' && !Number.isInteger(v) ? v.toPrecision(4) : String(v ?? ''));
  const lines = [
    `| ${columns.join(' | ')} |`,
    `| ${columns.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${columns.map((c) => cell(r[c] ?? null)).join(' | ')} |`),
  ];
  return `${lines.join('\n')}\n`;
}

/** Writes `<name>.json`, `<name>.md` and, when a chart is given, `<name>.png` into dir. */
export async function writeReport(
  dir: string,
  name: string,
  rows: Row[],
  opts: { chart?: LineChart; meta?: Record<string, unknown>; notes?: string } = {},
): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const files = [join(dir, `${name}.json`), join(dir, `${name}.md`)];
  await writeFile(files[0]!, `${JSON.stringify({ meta: opts.meta ?? {}, rows }, null, 2)}\n`);
  const heading = `# ${opts.chart?.title ?? name}\n\n`;
  await writeFile(files[1]!, `${heading}${opts.notes ? `${opts.notes}\n\n` : ''}${markdownTable(rows)}`);
  if (opts.chart) {
    const png = join(dir, `${name}.png`);
    await writeFile(png, await renderLineChart(rows, opts.chart));
    files.push(png);
  }
  return files;
}

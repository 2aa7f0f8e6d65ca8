import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Resvg } from '@resvg/resvg-js';
import * as vega from 'vega';
import * as vegaLite from 'vega-lite';

export type Row = Record<string, string | number | boolean | null>;

/** A line chart of `y` against `x`, one line per value of `series`. */
export interface LineChart {
  x: string;
  y: string;
  series?: string;
  /** One panel per value of this field, stacked, each with its own y axis: for measures in unlike units. */
  panel?: string;
  title?: string;
  logX?: boolean;
  logY?: boolean;
}

/** Renders a line chart to PNG bytes (vega-lite → SVG → resvg). */
export async function renderLineChart(rows: Row[], chart: LineChart): Promise<Buffer> {
  const axis = (field: string, log?: boolean, title?: null) => ({
    field,
    type: 'quantitative' as const,
    ...(log ? { scale: { type: 'log' as const } } : {}),
    ...(title === null ? { title } : {}),
  });
  const lines = {
    mark: { type: 'line' as const, point: true },
    encoding: {
      x: axis(chart.x, chart.logX),
      // with panels, each panel's header names what its y axis measures
      y: axis(chart.y, chart.logY, chart.panel ? null : undefined),
      ...(chart.series ? { color: { field: chart.series, type: 'nominal' as const } } : {}),
    },
  };
  const common = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: chart.title,
    // vega annotates the objects it is given: hand it copies.
    data: { values: rows.map((r) => ({ ...r })) },
    config: { background: 'white' },
  };
  const spec: vegaLite.TopLevelSpec = chart.panel
    ? {
        ...common,
        facet: { row: { field: chart.panel, type: 'nominal', title: null } },
        spec: { width: 640, height: 200, ...lines },
        resolve: { scale: { y: 'independent' } },
      }
    : { ...common, width: 640, height: 360, ...lines };
  const view = new vega.View(vega.parse(vegaLite.compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return new Resvg(svg, { font: { loadSystemFonts: true } }).render().asPng();
}

/** A GitHub-flavoured Markdown table of the rows, columns in the order of the first row. */
export function markdownTable(rows: Row[]): string {
  if (rows.length === 0) return '(no rows)\n';
  const columns = Object.keys(rows[0]);
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
  await writeFile(files[0], `${JSON.stringify({ meta: opts.meta ?? {}, rows }, null, 2)}\n`);
  const heading = `# ${opts.chart?.title ?? name}\n\n`;
  await writeFile(files[1], `${heading}${opts.notes ? `${opts.notes}\n\n` : ''}${markdownTable(rows)}`);
  if (opts.chart) {
    const png = join(dir, `${name}.png`);
    await writeFile(png, await renderLineChart(rows, opts.chart));
    files.push(png);
  }
  return files;
}

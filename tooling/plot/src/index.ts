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
  /** Axis titles, with their units (`step time (ms)`); default: the field names. */
  xTitle?: string;
  yTitle?: string;
  /** `y` is a fraction drawn as a percentage (0.25 → 25 %). */
  percent?: boolean;
  series?: string;
  /** One panel per value of this field, stacked, each with its own y axis: for measures in unlike units. */
  panel?: string;
  title?: string;
  logX?: boolean;
  logY?: boolean;
  /** The rows the chart draws (the report's table keeps every row). */
  where?: (row: Row) => boolean;
}

/** Whether every x value is an integer (world sizes, rounds): then no tick falls between two, at 1.5. */
const integers = (values: unknown[]): boolean => values.every((v) => typeof v === 'number' && Number.isInteger(v));

/** The vega-lite spec of a line chart: each axis says its unit, and unlike units never share one. */
export function lineChartSpec(rows: Row[], chart: LineChart): vegaLite.TopLevelSpec {
  const drawn = chart.where ? rows.filter(chart.where) : rows;
  const whole = !chart.logX && integers(drawn.map((r) => r[chart.x]));
  const x = {
    field: chart.x,
    type: 'quantitative' as const,
    title: chart.xTitle ?? chart.x,
    ...(chart.logX ? { scale: { type: 'log' as const } } : {}),
    // (vega's explicit tick `values` dropped the middle one of 1, 2, 3: a minimum step instead)
    ...(whole ? { axis: { tickMinStep: 1, format: 'd' } } : {}),
  };
  const y = {
    field: chart.y,
    type: 'quantitative' as const,
    // with panels, each panel's header names what its y axis measures
    title: chart.panel ? null : (chart.yTitle ?? chart.y),
    ...(chart.logY ? { scale: { type: 'log' as const } } : {}),
    ...(chart.percent ? { axis: { format: '.0%' } } : {}),
  };
  const lines = {
    mark: { type: 'line' as const, point: true },
    encoding: {
      x,
      y,
      ...(chart.series ? { color: { field: chart.series, type: 'nominal' as const } } : {}),
    },
  };
  const common = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: chart.title,
    // vega annotates the objects it is given: hand it copies.
    data: { values: drawn.map((r) => ({ ...r })) },
    // legend labels whole, not cut at 160 px
    config: { background: 'white', legend: { labelLimit: 0 } },
  };
  return chart.panel
    ? {
        ...common,
        facet: { row: { field: chart.panel, type: 'nominal', title: null } },
        spec: { width: 640, height: 200, ...lines },
        resolve: { scale: { y: 'independent' } },
      }
    : { ...common, width: 640, height: 360, ...lines };
}

/** Renders a line chart to PNG bytes (vega-lite → SVG → resvg). */
export async function renderLineChart(rows: Row[], chart: LineChart): Promise<Buffer> {
  const view = new vega.View(vega.parse(vegaLite.compile(lineChartSpec(rows, chart)).spec), { renderer: 'none' });
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

/**
 * `pnpm bench replot [name…]`: redraws results/<name>.png from results/<name>.json with the
 * benchmark's chart (lib/charts.ts); runs no benchmark. Without names, every report that has a chart.
 */
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { type Row, renderLineChart } from '@ddp/plot';
import { CHARTS, type Meta } from './lib/charts.js';
import { benchCommand } from './lib/flags.js';

const names = benchCommand('replot', 'redraws results/<name>.png from results/<name>.json')
  .argument('[names...]', `reports to redraw: ${Object.keys(CHARTS).join(', ')}`)
  .parse().processedArgs[0] as string[];
const results = fileURLToPath(new URL('../results/', import.meta.url));
for (const name of names.length > 0 ? names : Object.keys(CHARTS)) {
  const spec = CHARTS[name];
  if (!spec) throw new Error(`no chart for ${name}: one of ${Object.keys(CHARTS).join(', ')}`);
  const json = `${results}${name}.json`;
  if (!existsSync(json)) {
    console.log(`${name}: no ${json}, skipped`);
    continue;
  }
  const report = JSON.parse(await readFile(json, 'utf8')) as { meta: Meta; rows: Row[] };
  const rows = spec.rows?.(report.meta) ?? report.rows;
  await writeFile(`${results}${name}.png`, await renderLineChart(rows, spec.chart(report.meta, rows)));
  console.log(`wrote ${results}${name}.png`);
}

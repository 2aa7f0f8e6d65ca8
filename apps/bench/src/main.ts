// `pnpm bench <name> [args…]` runs src/<name>.ts; each benchmark writes its figures to results/.
import { readdirSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const available = readdirSync(here)
  .filter((f) => f.endsWith('.ts') && f !== 'main.ts' && !f.includes('.test.'))
  .map((f) => f.slice(0, -3));
const name = process.argv[2];
if (!name || !available.includes(name)) {
  console.error(`usage: pnpm bench <${available.join('|')}> [args…]`);
  process.exit(2);
}
process.argv.splice(2, 1);
await import(pathToFileURL(`${here}${name}.ts`).href);

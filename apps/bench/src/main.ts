// `pnpm bench <name> [flags…]` runs src/<name>.ts; each benchmark writes its figures to results/.
import { readdirSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chooseOpenBLASCore, limitOpenMPSpin } from '@ddp/native-kernels';
import { Argument } from 'commander';
import { benchCommand } from './lib/flags.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const available = readdirSync(here)
  .filter((f) => f.endsWith('.ts') && f !== 'main.ts' && !f.includes('.test.'))
  .map((f) => f.slice(0, -3));
// Flags after the name are the benchmark's (`pnpm bench comm --help` is comm's help).
const program = benchCommand('', 'runs one benchmark; `pnpm bench <name> --help` lists its flags')
  .name('pnpm bench')
  .addArgument(new Argument('<name>', 'the benchmark').choices(available))
  .argument('[flags...]', "the benchmark's flags")
  .passThroughOptions()
  .allowUnknownOption()
  .parse();
const [name] = program.processedArgs as [string];
process.argv.splice(2, 1);
// Every process a benchmark starts, PyTorch's peers included, loads OpenBLAS with the same kernel
// set and OpenMP spin as the native kernels choose for ours: a ratio compares engines, not builds.
chooseOpenBLASCore();
limitOpenMPSpin();
await import(pathToFileURL(`${here}${name}.ts`).href);

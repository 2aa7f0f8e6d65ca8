#!/usr/bin/env node
// Inside the monorepo (src/ is there) runs the TypeScript source through tsx, so a stale dist/ is
// never what runs; an installed package ships only dist/.
import { existsSync } from 'node:fs';

const source = new URL('../src/cli.ts', import.meta.url);
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(source.href);
} else {
  await import(new URL('../dist/cli.js', import.meta.url).href);
}

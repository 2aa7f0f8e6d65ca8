// Vitest global setup: build and pack once for every test file of this package.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { packAll } from './tarballs.js';

declare module 'vitest' {
  export interface ProvidedContext {
    packDir: string;
  }
}

export default function setup(project: TestProject): () => void {
  const packDir = mkdtempSync(join(tmpdir(), 'ddp-tarballs-'));
  packAll(packDir);
  project.provide('packDir', packDir);
  return () => rmSync(packDir, { recursive: true, force: true });
}

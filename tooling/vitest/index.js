import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Packages are tested from source: the workspace-only "@ddp/source" export condition points at
// src/*.ts (published package.json files drop it: see publishConfig.exports).
export default defineConfig({
  resolve: { conditions: ['@ddp/source'] },
  ssr: { resolve: { conditions: ['@ddp/source'] } },
  test: {
    include: ['src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 10_000,
    // two test files at once even on 2 cores (vitest's default there is one): most of a multi-process
    // test is its ranks starting and waiting on each other, so the comm suite takes 316 s, not 421 s
    maxWorkers: 2,
    // rank processes run the workspace compiled once to JavaScript, not under tsx (compiled.js)
    globalSetup: [fileURLToPath(new URL('./compiled.js', import.meta.url))],
  },
});

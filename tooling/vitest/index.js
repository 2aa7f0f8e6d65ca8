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
  },
});

import shared from '@ddp/vitest-config';
import { defineConfig, mergeConfig } from 'vitest/config';

export default mergeConfig(shared, defineConfig({ test: { globalSetup: ['src/pack.global.ts'] } }));

export { default } from '@ddp/vitest-config';

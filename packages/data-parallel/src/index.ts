export { chunkSizes, DataParallel, type DataParallelOptions } from './data-parallel.js';
export { DataParallelError } from './errors.js';

// A script that runs one DataParallel forward and ends without dispose(): it must exit.
import { extname } from 'node:path';
import { tensor } from '@ddp/autograd';
import { DataParallel } from '../index.js';

// ./mlp.js where this script runs compiled (@ddp/launch/testing), ./mlp.ts under tsx
const dp = await DataParallel.create(new URL(`./mlp${extname(import.meta.url)}`, import.meta.url), { replicas: 2 });
const y = await dp.forward(tensor(new Float32Array(4 * 6).fill(0.5), [4, 6]));
console.log(`RESULT ${JSON.stringify({ rows: y.shape[0] })}`);

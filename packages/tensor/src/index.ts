import * as tf from '@tensorflow/tfjs-core';
import { initBackend } from './backend.js';

export { tf };
export { type BackendName, getBackend, initBackend, setBackend } from './backend.js';

// Importing @ddp/tensor leaves a ready backend behind, so callers never race its async init.
await initBackend();

import { setTimeout as sleep } from 'node:timers/promises';
import { tf } from '@ddp/tensor';
import { DataLoader, Dataset } from '../index.js';

/**
 * Reads one batch of a fresh iterator five times and lets each iterator go without return()
 * (torch's next(iter(loader))), then collects them (run with --expose-gc). Prints RESULT
 * { leaked }: the tensors left beyond the baseline once the prefetched batches are gone.
 */
class Rows extends Dataset<tf.Tensor> {
  get length() {
    return 16;
  }
  getItem(i: number) {
    return tf.fill([4], i);
  }
}
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');
const before = tf.memory().numTensors;
for (let k = 0; k < 5; k++) {
  const first = await new DataLoader(new Rows(), { batchSize: 2, prefetch: 3 })[Symbol.asyncIterator]().next();
  tf.dispose(first.value);
}
for (let round = 0; round < 5; round++) {
  await sleep(20); // the prefetches settle and the finalizers run between turns
  gc();
}
await sleep(20);
console.log(`RESULT ${JSON.stringify({ leaked: tf.memory().numTensors - before })}`);

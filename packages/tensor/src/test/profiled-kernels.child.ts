// oneDNN's products and convolutions in a loop while a profiler's SIGPROF interrupts the thread
// (the test starts this under `node --cpu-prof`): each result must equal the first, bit for bit,
// and the process must end normally.
import { setBackend, tf } from '../index.js';

await setBackend('wasm');
const a = tf.randomNormal([128, 256], 0, 1, 'float32', 1);
const b = tf.randomNormal([256, 512], 0, 1, 'float32', 2);
const x = tf.randomNormal([8, 14, 14, 16], 0, 1, 'float32', 3);
const w = tf.randomNormal([3, 3, 16, 32], 0, 1, 'float32', 4);
const run = (): tf.Tensor[] => {
  const c = tf.matMul(a, b);
  return [
    c,
    tf.matMul(c, b, false, true),
    tf.matMul(a, c, true, false),
    tf.conv2d(x as tf.Tensor4D, w as tf.Tensor4D, 1, 'same'),
  ];
};
const first = run();
let differing = 0;
for (let i = 0; i < 1000; i++)
  differing += tf.tidy(
    () => tf.addN(run().map((t, k) => tf.sum(tf.cast(tf.notEqual(t, first[k]), 'int32')))).dataSync()[0],
  );
console.log(`done ${differing}`);

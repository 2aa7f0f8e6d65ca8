/**
 * Times cpu against wasm on two small-model training workloads and prints a Markdown table.
 * Run: pnpm --filter @ddp/tensor measure
 */
import { setBackend, tf } from '../src/index.js';
import type { BackendName } from '../src/index.js';

interface Workload {
  name: string;
  run: () => void;
}

function matmulWorkload(n: number): Workload {
  return {
    name: `matmul ${n}x${n}x${n} (float32)`,
    run: () => {
      tf.tidy(() => {
        const a = tf.randomNormal([n, n]);
        const b = tf.randomNormal([n, n]);
        tf.matMul(a, b).dataSync();
      });
    },
  };
}

/** An MLP-ish step: bias add, gelu-like tanh, softmax, mean-square reduction (batch 64, width 512). */
function elementwiseWorkload(rows: number, cols: number): Workload {
  return {
    name: `elementwise+reduce ${rows}x${cols}`,
    run: () => {
      tf.tidy(() => {
        const x = tf.randomNormal([rows, cols]);
        const bias = tf.randomNormal([cols]);
        const h = tf.tanh(tf.add(x, bias));
        const p = tf.softmax(tf.mul(h, 2));
        const sq = tf.square(tf.sub(p, tf.mean(p, 1, true)));
        tf.sum(sq, 1).dataSync();
        tf.max(h).dataSync();
      });
    },
  };
}

/** A conv layer's forward and both gradients (the weight gradient runs on the cpu fallback under wasm). */
function convWorkload(): Workload {
  return {
    name: 'conv2d 3x3 fwd+bwd, x [8,16,16,8], w [3,3,8,16]',
    run: () => {
      tf.tidy(() => {
        const x = tf.randomNormal([8, 16, 16, 8]) as tf.Tensor4D;
        const w = tf.randomNormal([3, 3, 8, 16]) as tf.Tensor4D;
        const y = tf.conv2d(x, w, 1, 'same');
        const filterShape = [3, 3, 8, 16];
        const attrs = { strides: [1, 1], pad: 'same', dataFormat: 'NHWC', dilations: [1, 1], filterShape };
        const named = attrs as unknown as tf.NamedAttrMap;
        (tf.engine().runKernel('Conv2DBackpropFilter', { x, dy: y }, named) as tf.Tensor).dataSync();
        tf.conv2dTranspose(y, w, x.shape, 1, 'same').dataSync();
      });
    },
  };
}

function timeIt(w: Workload, iters: number): number {
  for (let i = 0; i < 3; i++) w.run(); // warm-up: kernel compilation, allocator
  const t0 = performance.now();
  for (let i = 0; i < iters; i++) w.run();
  return (performance.now() - t0) / iters;
}

const workloads = [matmulWorkload(256), elementwiseWorkload(64, 512), convWorkload()];
const backends: BackendName[] = ['cpu', 'wasm'];
const rows: string[] = ['| workload | cpu ms | wasm ms |', '| --- | ---: | ---: |'];
const results = new Map<string, number[]>();
for (const backend of backends) {
  await setBackend(backend);
  for (const w of workloads) {
    const ms = timeIt(w, 20);
    results.set(w.name, [...(results.get(w.name) ?? []), ms]);
  }
}
for (const [name, ms] of results) rows.push(`| ${name} | ${ms.map((m) => m.toFixed(2)).join(' | ')} |`);
console.log(rows.join('\n'));

import { tf, useNativeKernels, nativeKernelsSummary } from './index.js';
console.log(nativeKernelsSummary());
const shapes: [number[], number[], boolean, boolean][] = [[[32,1024],[2048,1024],false,true],[[32,2048],[2048,1024],false,false],[[32,2048],[32,1024],true,false],[[4,3,5],[5,6],false,false],[[2,3,5],[2,7,5],false,true],[[2,5,3],[1,5,4],true,false]];
for (const [sa, sb, ta, tb] of shapes) {
  const a = tf.randomNormal(sa, 0, 1, 'float32', 1), b = tf.randomNormal(sb, 0, 1, 'float32', 2);
  const time = (on: boolean) => { useNativeKernels(on); const c = tf.matMul(a, b, ta, tb); const d = c.dataSync(); c.dispose(); const t0 = performance.now(); for (let i=0;i<5;i++){ tf.matMul(a,b,ta,tb).dispose(); } return [d, (performance.now()-t0)/5] as const; };
  const [dn, tn] = time(true); const [dw, tw] = time(false);
  let worst = 0; for (let i=0;i<dn.length;i++) worst = Math.max(worst, Math.abs(dn[i]!-dw[i]!)/(1+Math.abs(dw[i]!)));
  console.log(sa, sb, ta, tb, 'native', tn.toFixed(2), 'wasm', tw.toFixed(2), 'maxrel', worst.toExponential(2));
  tf.dispose([a,b]);
}
console.log(tf.memory().numTensors);

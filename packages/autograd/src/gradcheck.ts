import { checkNumberOptions, tf } from '@ddp/tensor';
import { normalSeed } from './creation.js';
import { argumentError } from './errors.js';
import { noGrad } from './grad-mode.js';
import { tidy } from './scope.js';
import { Tensor } from './tensor.js';

export interface GradcheckOptions {
  /** Central-difference step (float32 wants 1e-2..1e-3). */
  eps?: number;
  rtol?: number;
  atol?: number;
  /** Seed of the random upstream gradient. */
  seed?: number;
}

export interface GradcheckResult {
  ok: boolean;
  /** Largest |analytic - numeric| / (atol + rtol * |numeric|) seen; ok when <= 1. */
  worst: number;
  message: string;
}

function dot(y: tf.Tensor, dy: Float32Array): number {
  const v = y.dataSync();
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i] * dy[i];
  return s;
}

/**
 * Compares backward()'s gradients of fn at `inputs` (float32 leaves; those requiring grad are
 * checked) with central finite differences of sum(fn(inputs) * dy) for a random dy.
 */
export async function gradcheck(
  fn: (...inputs: Tensor[]) => Tensor,
  inputs: Tensor[],
  opts: GradcheckOptions = {},
): Promise<GradcheckResult> {
  checkNumberOptions('gradcheck', opts, ['eps', 'rtol', 'atol', 'seed'], argumentError);
  const { eps = 1e-2, rtol = 1e-2, atol = 1e-3, seed = 1 } = opts;
  const y = fn(...inputs);
  const dyT = tf.randomNormal(y.shape, 0, 1, 'float32', normalSeed(seed));
  const dy = dyT.dataSync() as Float32Array;
  for (const x of inputs) x.grad = null;
  await y.backward(dyT);
  dyT.dispose();
  y.dispose();
  let worst = 0;
  let message = 'ok';
  for (const [k, x] of inputs.entries()) {
    if (!x.requiresGrad) continue;
    const analytic = x.grad ? (x.grad.dataSync() as Float32Array) : new Float32Array(x.size);
    const base = x.data.dataSync().slice() as Float32Array;
    const evalAt = (values: Float32Array): number =>
      noGrad(() =>
        tidy(() => {
          const probe = inputs.map((t, i) => (i === k ? new Tensor(tf.tensor(values, t.shape)) : t));
          const out = fn(...probe);
          const v = dot(out.data, dy);
          probe[k].dispose();
          return v;
        }),
      );
    for (let j = 0; j < base.length; j++) {
      const p = base.slice();
      p[j] = base[j] + eps;
      const m = base.slice();
      m[j] = base[j] - eps;
      const numeric = (evalAt(p) - evalAt(m)) / (2 * eps);
      // a NaN on either side fails, as torch's allclose (`NaN > worst` was false, so NaN passed), and
      // stays the worst: a later finite error must not replace it
      const err = Math.abs(analytic[j] - numeric) / (atol + rtol * Math.abs(numeric));
      if (!Number.isNaN(worst) && !(err <= worst)) {
        worst = err;
        message = `input ${k} element ${j}: analytic ${analytic[j]} vs numeric ${numeric}`;
      }
    }
    x.grad = null;
  }
  return { ok: worst <= 1, worst, message }; // worst NaN: not ok
}

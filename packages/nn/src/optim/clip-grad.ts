import type { Tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { OptimizerError } from './optimizer.js';

/**
 * torch.nn.utils.clip_grad_norm_: scales every gradient by min(1, maxNorm / (total + 1e-6)),
 * where total is the norm of all gradients together. Returns the total norm before clipping.
 */
export function clipGradNorm(params: Iterable<Tensor>, maxNorm: number, normType = 2): number {
  if (!(typeof maxNorm === 'number' && maxNorm >= 0))
    throw new OptimizerError(`clipGradNorm: maxNorm must be >= 0, got ${maxNorm}`);
  if (!(typeof normType === 'number' && normType > 0))
    throw new OptimizerError(`clipGradNorm: normType must be > 0 (or Infinity), got ${normType}`);
  const withGrad = [...params].filter((p) => p.grad !== null);
  if (withGrad.length === 0) return 0;
  const total = tf.tidy(() => {
    const grads = withGrad.map((p) => p.grad as tf.Tensor);
    if (normType === Number.POSITIVE_INFINITY)
      return tf.max(tf.stack(grads.map((g) => tf.max(tf.abs(g))))).dataSync()[0];
    const perParam = grads.map((g) => tf.sum(tf.pow(tf.abs(g), normType)));
    return tf.sum(tf.stack(perParam)).dataSync()[0] ** (1 / normType);
  });
  const coef = Math.min(1, maxNorm / (total + 1e-6));
  if (coef < 1) for (const p of withGrad) p.grad = tf.mul(p.grad as tf.Tensor, coef);
  return total;
}

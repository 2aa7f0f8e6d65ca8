import { AutogradFunction, type Context, exp, noGrad, type Tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';

/** CLIP's ceiling on the temperature-inverse: logits are at most 100 × cosine similarity. */
export const MAX_LOGIT_SCALE = 100;

/** min(x, max) with gradient 1 below the ceiling and 0 above it. */
class ClampMax extends AutogradFunction {
  forward(ctx: Context, x: tf.Tensor, max: number): tf.Tensor {
    ctx.saveForBackward(tf.cast(tf.lessEqual(x, max), 'float32'));
    return tf.minimum(x, max);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [below] = ctx.savedTensors as [tf.Tensor];
    return [tf.mul(dy, below), null];
  }
}

/** exp(min(logScale, ln 100)): the learnable, log-parameterised temperature-inverse of CLIP. */
export const logitScaleFromLog = (logScale: Tensor): Tensor => {
  const clamped = ClampMax.apply(logScale, Math.log(MAX_LOGIT_SCALE));
  const scale = exp(clamped);
  clamped.dispose();
  return scale;
};

/** After an optimizer step, clamp the parameter itself into [0, ln 100] (CLIP's training loop does this). */
export function clampLogitScale_(logScale: Tensor): void {
  noGrad(() => {
    logScale.data = tf.clipByValue(logScale.data, 0, Math.log(MAX_LOGIT_SCALE));
  });
}

import * as tf from '@tensorflow/tfjs-core';

/**
 * Mean and biased variance over `axes`, as tf.moments, with the mean corrected once: tfjs-wasm
 * totals float32 in order, so the mean of values far from zero (1e4 ± 1) is several ulps off and
 * x − mean, what every normalisation divides, carries that error (BatchNorm's y 8× torch's). The
 * mean of x − mean measures the error in the values' own scale; adding it back gives the mean
 * to an ulp, as torch's pairwise sums do.
 */
export function moments(x: tf.Tensor, axes: number[], keepDims = false): { mean: tf.Tensor; variance: tf.Tensor } {
  return tf.tidy(() => {
    const rough = tf.mean(x, axes, true);
    const mean = tf.add(rough, tf.mean(tf.sub(x, rough), axes, true));
    const variance = tf.mean(tf.square(tf.sub(x, mean)), axes, keepDims);
    return { mean: keepDims ? mean : tf.squeeze(mean, axes), variance };
  });
}

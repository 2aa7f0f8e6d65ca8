// PowerSGD's Gram-Schmidt step (powersgd.ts), on factors kept in flat row-major arrays.

/**
 * Gram-Schmidt on the r columns of the row-major [n, r] matrix at p[offset…]. A column that depends on
 * the earlier ones (its residual under 1e-4 of its norm, or zero) is taken from `redraw()` (an [n, r]
 * array) when given, else set to zero. No epsilon is added to the norm (torch's default): with warm
 * start P = MQ scales as σ², and `norm + 1e-8` shrank the factors of small gradients.
 */
export function orthonormalizeColumns(
  p: Float32Array,
  offset: number,
  n: number,
  r: number,
  redraw?: () => Float32Array,
) {
  const at = (k: number, i: number) => offset + k * r + i;
  for (let i = 0; i < r; i++) {
    for (let attempt = 0; ; attempt++) {
      let before = 0;
      for (let k = 0; k < n; k++) before += p[at(k, i)] ** 2;
      for (let j = 0; j < i; j++) {
        let dot = 0;
        for (let k = 0; k < n; k++) dot += p[at(k, i)] * p[at(k, j)];
        for (let k = 0; k < n; k++) p[at(k, i)] -= dot * p[at(k, j)];
      }
      let norm = 0;
      for (let k = 0; k < n; k++) norm += p[at(k, i)] ** 2;
      norm = Math.sqrt(norm);
      const dependent = norm === 0 || norm < 1e-4 * Math.sqrt(before);
      if (dependent && redraw && attempt < 3) {
        const fresh = redraw();
        for (let k = 0; k < n; k++) p[at(k, i)] = fresh[k * r + i];
        continue;
      }
      // a dependent column's residual is noise, not orthogonal to the rest: normalized, a rank-1 M came back 0.43 off
      for (let k = 0; k < n; k++) p[at(k, i)] = dependent ? 0 : p[at(k, i)] / norm;
      break;
    }
  }
}

/** Least-squares slope of y against x (units of y per unit of x); 0 for fewer than 2 points. */
export function slope(points: [number, number][]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const [x, y] of points) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
  }
  return sxx === 0 ? 0 : sxy / sxx;
}

export interface Sample {
  op: number;
  rss: number;
  heapUsed: number;
  numTensors: number;
}

export interface Slopes {
  /** Bytes per 1000 ops. */
  rssPer1000: number;
  heapPer1000: number;
  /** Tensors per 1000 ops. */
  tensorsPer1000: number;
  samples: number;
}

/** Slopes per 1000 ops over the samples after the first `warmup` fraction of the run. */
export function slopes(samples: Sample[], warmup = 0.25): Slopes {
  const last = samples.at(-1)?.op ?? 0;
  const kept = samples.filter((s) => s.op >= last * warmup);
  const per1000 = (key: 'rss' | 'heapUsed' | 'numTensors') => 1000 * slope(kept.map((s) => [s.op, s[key]]));
  return {
    rssPer1000: per1000('rss'),
    heapPer1000: per1000('heapUsed'),
    tensorsPer1000: per1000('numTensors'),
    samples: kept.length,
  };
}

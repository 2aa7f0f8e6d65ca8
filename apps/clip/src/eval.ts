import { fromTf, l2Normalize, matmul, noGrad, type Tensor, tidy } from '@ddp/autograd';
import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import { tf } from '@ddp/tensor';
import { ALL_CAPTIONS, type DigitPairs, tokenize } from './data.js';
import type { ClipModel } from './model.js';

const CHUNK = 250;

/**
 * Zero-shot top-1: each held-out pair's image against all 100 captions; the nearest caption
 * (cosine) must be its own. The first `count` test pairs are split over the ranks (rank r takes
 * r, r+N, …) and the hit counts summed.
 */
export async function zeroShotTop1(
  model: ClipModel,
  pairs: DigitPairs,
  count: number,
  group: ProcessGroup,
): Promise<number> {
  const wasTraining = model.training;
  model.eval();
  const mine = [...Array(count).keys()].filter((i) => i % group.size === group.rank);
  const captions = tf.tensor2d(ALL_CAPTIONS.flatMap(tokenize), [ALL_CAPTIONS.length, 2], 'int32');
  const text: Tensor = noGrad(() => tidy(() => l2Normalize(model.encodeText(captions))));
  let hits = 0;
  for (let at = 0; at < mine.length; at += CHUNK) {
    const ids = mine.slice(at, at + CHUNK);
    const { images, tokens } = pairs.batch(ids);
    const input = fromTf(images);
    const sims = noGrad(() => tidy(() => matmul(l2Normalize(model.encodeImage(input)), text, { transposeB: true })));
    const best = tf.argMax(sims.data, 1);
    const predicted = best.dataSync();
    ids.forEach((i, k) => {
      if (predicted[k] === pairs.captionIndex(i)) hits++;
    });
    tf.dispose([tokens, best]);
    input.dispose();
    sims.dispose();
  }
  text.dispose();
  captions.dispose();
  model.train(wasTraining);
  const counts = Float64Array.of(hits, mine.length);
  await group.allReduce(counts, { op: ReduceOp.SUM }).wait();
  return counts[0] / counts[1];
}

import { concat, crossEntropy, l2Normalize, matmul, mul, narrow, type Tensor, tidy } from '@ddp/autograd';
import { logitScaleFromLog } from './scale.js';
import { checkFeaturePair, checkLossOptions, gatherForLoss, type LossOptions, rangeFrom } from './world.js';

/** The options and the two modalities' features, or a ContrastiveError naming the loss; returns [batch, dim]. */
function checkPairs(image: Tensor, text: Tensor, opts: LossOptions, op: string): [number, number] {
  checkLossOptions(op, opts, ['naiveGather']);
  return checkFeaturePair(op, image, text, opts, 'image and text features');
}

/**
 * CLIP's symmetric InfoNCE loss over a batch spread across ranks. Each rank L2-normalises its
 * features, all-gathers both modalities in one collective (backward: reduce-scatter), and
 * computes [local × global] logits both ways, scaled by exp(min(logitScale, ln 100)). Row i of
 * this rank is sample offset + i globally, offset being the rows on lower ranks.
 *
 * The returned loss is this rank's sum of cross-entropies × worldSize / globalBatch: with equal
 * batches that is the mean over local rows, and for any batch sizes the average over ranks (what
 * DDP's gradient averaging computes) is the single-process mean loss.
 */
export async function clipLoss(
  imageFeatures: Tensor,
  textFeatures: Tensor,
  logitScale: Tensor,
  opts: LossOptions = {},
): Promise<Tensor> {
  const [n, d] = checkPairs(imageFeatures, textFeatures, opts, 'clipLoss');
  const both = tidy(() => concat([l2Normalize(imageFeatures), l2Normalize(textFeatures)], 1));
  const g = await gatherForLoss(both, opts);
  const total = g.rowsPerRank.reduce((a, b) => a + b, 0);
  const loss = tidy(() => {
    const img = narrow(both, 1, 0, d);
    const txt = narrow(both, 1, d, d);
    const allImg = narrow(g.gathered, 1, 0, d);
    const allTxt = narrow(g.gathered, 1, d, d);
    const scale = logitScaleFromLog(logitScale);
    const labels = rangeFrom(g.offset, n);
    const perImage = crossEntropy(mul(matmul(img, allTxt, { transposeB: true }), scale), labels, { reduction: 'sum' });
    const perText = crossEntropy(mul(matmul(txt, allImg, { transposeB: true }), scale), labels, { reduction: 'sum' });
    return mul(perImage.add(perText), g.worldSize / (2 * total));
  });
  both.dispose();
  if (g.own) g.gathered.dispose();
  return loss;
}

/**
 * The common implementation, kept for comparison (benchmarks): every rank gathers both
 * modalities and computes the whole [global × global] logit matrix both ways, so every rank
 * returns the same, global, loss. With allGatherWithGrad's summing backward its gradients are
 * exact too (each rank's inputs get N × their share, DDP's average divides by N), but each rank
 * does N× the compute of `clipLoss` and holds G/B× its logits.
 */
export async function clipLossFullMatrix(
  imageFeatures: Tensor,
  textFeatures: Tensor,
  logitScale: Tensor,
  opts: LossOptions = {},
): Promise<Tensor> {
  const [, d] = checkPairs(imageFeatures, textFeatures, opts, 'clipLossFullMatrix');
  const both = tidy(() => concat([l2Normalize(imageFeatures), l2Normalize(textFeatures)], 1));
  const g = await gatherForLoss(both, opts);
  const total = g.rowsPerRank.reduce((a, b) => a + b, 0);
  const loss = tidy(() => {
    const logits = mul(
      matmul(narrow(g.gathered, 1, 0, d), narrow(g.gathered, 1, d, d), { transposeB: true }),
      logitScaleFromLog(logitScale),
    );
    const labels = rangeFrom(0, total);
    return mul(
      crossEntropy(logits, labels, { reduction: 'sum' }).add(
        crossEntropy(logits.transpose(), labels, { reduction: 'sum' }),
      ),
      1 / (2 * total),
    );
  });
  both.dispose();
  if (g.own) g.gathered.dispose();
  return loss;
}

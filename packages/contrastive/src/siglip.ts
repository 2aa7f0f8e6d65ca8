import { add, fromTf, l2Normalize, logSigmoid, matmul, mul, neg, sum, type Tensor, tidy } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { ringExchange } from './ring.js';
import { logitScaleFromLog } from './scale.js';
import { checkFeaturePair, checkLossOptions, type LossOptions, lossGroup } from './world.js';

/** -Σ log σ(±logits) of one [local × block] tile; the own block has its positives on the diagonal. */
function tileLoss(img: Tensor, block: Tensor, scale: Tensor, bias: Tensor, own: boolean): Tensor {
  return tidy(() => {
    const logits = add(mul(matmul(img, block, { transposeB: true }), scale), bias);
    if (!own) return neg(sum(logSigmoid(neg(logits))));
    const n = img.shape[0];
    const signs = fromTf(tf.tidy(() => tf.sub(tf.mul(tf.eye(n), 2), 1)));
    return neg(sum(logSigmoid(mul(logits, signs))));
  });
}

/**
 * SigLIP's pairwise sigmoid loss over a batch spread across ranks. Images stay put; the text
 * blocks travel round the ring (rank r sends to r+1, receives from r−1), N−1 hops, each hop
 * posted before the current tile is computed so transfer and compute overlap. No rank holds
 * more than one [local × block] logit tile at a time in the forward. Scale is
 * exp(min(logitScale, ln 100)) and bias is added to every logit. Returned: this rank's summed
 * loss × worldSize / globalBatch (averaged over ranks: the single-process loss, which
 * normalises by the batch size as SigLIP does).
 */
export async function sigLipLoss(
  imageFeatures: Tensor,
  textFeatures: Tensor,
  logitScale: Tensor,
  logitBias: Tensor,
  opts: Omit<LossOptions, 'naiveGather'> = {},
): Promise<Tensor> {
  checkLossOptions('sigLipLoss', opts, []);
  const group = lossGroup(opts);
  const worldSize = group?.size ?? 1;
  const rank = group?.rank ?? 0;
  const n = imageFeatures.shape[0];
  checkFeaturePair('sigLipLoss', imageFeatures, textFeatures, opts, 'image and text features');
  const rows =
    group && worldSize > 1 ? ((await group.allGather(Int32Array.of(n)).wait()) as Int32Array[]).map((a) => a[0]) : [n];
  const total = rows.reduce((a, b) => a + b, 0);
  const img = tidy(() => l2Normalize(imageFeatures));
  const scale = logitScaleFromLog(logitScale);
  const blocks = [tidy(() => l2Normalize(textFeatures))];
  const tiles: Tensor[] = [];
  for (let hop = 0; hop < worldSize; hop++) {
    const block = blocks[hop];
    const incoming =
      hop + 1 < worldSize ? ringExchange(block, group!, rows[(rank - hop - 1 + worldSize) % worldSize]) : null;
    tiles.push(tileLoss(img, block, scale, logitBias, hop === 0));
    if (incoming) blocks.push(await incoming);
  }
  const loss = tidy(() =>
    mul(
      tiles.reduce((a, b) => add(a, b)),
      worldSize / total,
    ),
  );
  for (const t of [img, scale, ...blocks, ...tiles]) t.dispose();
  return loss;
}

import { concat, crossEntropy, div, l2Normalize, maskedFill, matmul, type Tensor, tidy } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { ContrastiveError } from './errors.js';
import {
  checkFeaturePair,
  checkLossOptions,
  gatherForLoss,
  type LossOptions,
  lossGroup,
  worldRankOf,
} from './world.js';

/** A self-similarity: finite (−∞ would make the one-hot product of the cross-entropy NaN), exp() of it is 0. */
const MASKED = -1e9;

/**
 * SimCLR's NT-Xent over a batch spread across ranks. z1 and z2 are two views of the same
 * samples ([batch, dim] each). Each rank gathers its [z1; z2] (2·batch rows), so the global
 * columns are [z1₀; z2₀; z1₁; z2₁; …]; its 2·batch rows are compared with every global row at
 * temperature tau, its own column masked, the positive of a z1 row being its z2 row and back.
 * Returned: this rank's summed cross-entropy × worldSize / (2 · globalBatch), whose average over
 * ranks is the single-process mean over all 2·globalBatch rows.
 */
export async function ntXentLoss(z1: Tensor, z2: Tensor, opts: LossOptions & { tau?: number } = {}): Promise<Tensor> {
  checkLossOptions('ntXentLoss', opts, ['naiveGather', 'tau']);
  const tau = opts.tau ?? 0.5;
  const n = z1.shape[0];
  if (!(typeof tau === 'number' && tau > 0 && Number.isFinite(tau))) {
    throw new ContrastiveError(
      `temperature tau must be a positive finite number, got ${tau}`,
      worldRankOf(lossGroup(opts)),
      'ntXentLoss',
    );
  }
  checkFeaturePair('ntXentLoss', z1, z2, opts, 'views');
  const local = tidy(() => l2Normalize(concat([z1, z2], 0)));
  const g = await gatherForLoss(local, opts);
  const columns = g.rowsPerRank.reduce((a, b) => a + b, 0); // 2 · global batch
  const start = g.offset; // this rank's [z1; z2] block among the global columns
  const self = [...Array(2 * n).keys()].map((i) => start + i);
  const positive = self.map((c, i) => (i < n ? c + n : c - n));
  const loss = tidy(() => {
    const mask = tf.tidy(() =>
      tf.equal(tf.expandDims(tf.range(0, columns, 1, 'int32'), 0), tf.tensor2d(self, [2 * n, 1], 'int32')),
    );
    const sim = maskedFill(div(matmul(local, g.gathered, { transposeB: true }), tau), mask, MASKED);
    mask.dispose();
    return crossEntropy(sim, positive, { reduction: 'sum' }).mul(g.worldSize / columns);
  });
  local.dispose();
  if (g.own) g.gathered.dispose();
  return loss;
}

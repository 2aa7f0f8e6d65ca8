// BatchNorm in a pipeline stage sees one micro-batch at a time, as in torch's Pipe: it normalises with
// that micro-batch's statistics and moves its running statistics once per micro-batch. Said once per
// stage rather than refused (torch's Pipe allows it), because pipelineStep's promise that the gradients
// are the whole batch's does not hold there (probe AK: 0.066 off one process on the whole batch).
import { BatchNorm } from '@ddp/nn';
import type { PipelineStage } from './stage.js';

const told = new WeakSet<PipelineStage>();

/** Warns (DDP_PIPELINE_BATCH_NORM) when `stage` runs `microBatches` > 1 through a BatchNorm in training mode. */
export function warnMicroBatchNorm(stage: PipelineStage, microBatches: number): void {
  if (microBatches < 2 || told.has(stage)) return;
  const norms = [...stage.namedModules()].filter(([, m]) => m instanceof BatchNorm && m.training).map(([n]) => n);
  if (norms.length === 0) return;
  told.add(stage);
  process.emitWarning(
    `pipelineStep: stage ${stage.stage} holds BatchNorm in training mode (${norms.join(', ')}): each of the ` +
      `${microBatches} micro-batches is normalised with its own statistics and moves the running statistics ` +
      `(${microBatches} times a step), as in torch's Pipe, so the gradients are not those of the whole batch. ` +
      'One micro-batch, the BatchNorms in eval(), or LayerNorm/GroupNorm give the whole batch’s',
    { code: 'DDP_PIPELINE_BATCH_NORM' },
  );
}

import { type Indices, parameterShardOf, Tensor } from '@ddp/autograd';
import { Module, type TensorModule } from '@ddp/nn';

/** A model cut into pipeline parts: embedding → layers → head, then the loss. */
export interface PipelineParts {
  /** Maps the model's input (token ids) to the first hidden state; kept by the first stage. */
  embedding: Module & { forward(input: Indices): Tensor };
  /** The layers split over the stages; each maps a hidden state to one of the same shape. */
  layers: TensorModule[];
  /** Maps the last hidden state to the output (final norm and projection); kept by the last stage. */
  head: TensorModule;
  /** The loss of the head's output against a target, a scalar (see pipelineStep's lossReduction). */
  lossFn: (output: Tensor, target: Indices) => Tensor;
}

export class PipelineStageError extends Error {
  override readonly name = 'PipelineStageError';
}

/**
 * The layers [start, end) of `numLayers` given to `stage` of `numStages`: as even as can be,
 * the first `numLayers % numStages` stages getting one more (picotron's distribution).
 */
export function distributeLayers(numLayers: number, numStages: number, stage: number): [number, number] {
  if (!Number.isInteger(numStages) || numStages < 1 || !Number.isInteger(stage) || stage < 0 || stage >= numStages) {
    throw new PipelineStageError(`distributeLayers: stage ${stage} of ${numStages} is not a stage`);
  }
  if (numLayers < numStages)
    throw new PipelineStageError(`distributeLayers: ${numLayers} layers cannot fill ${numStages} stages`);
  const base = Math.floor(numLayers / numStages);
  const extra = numLayers % numStages;
  const start = stage * base + Math.min(stage, extra);
  return [start, start + base + (stage < extra ? 1 : 0)];
}

/**
 * Refuses parameters shared by parts that go to different stages (an embedding tied to the LM
 * head): each stage would hold a copy trained on its own gradient only, and the stage that does
 * not keep a part disposed the shared tensor under the one it keeps. Megatron all-reduces such
 * a tie between the first and last stages; here the model must untie it (or run on one stage).
 */
function refuseTiedAcrossStages(parts: PipelineParts, numStages: number, stage: number): void {
  const owners = [
    { prefix: 'embedding', module: parts.embedding, stage: 0 },
    ...parts.layers.map((module, i) => ({
      prefix: `layers.${i}`,
      module,
      stage: [...Array(numStages).keys()].find((s) => i < distributeLayers(parts.layers.length, numStages, s)[1]),
    })),
    { prefix: 'head', module: parts.head, stage: numStages - 1 },
  ];
  const seen = new Map<Tensor, { name: string; stage: number | undefined }>();
  for (const owner of owners) {
    for (const [name, p] of owner.module.namedParameters()) {
      const first = seen.get(p);
      if (first && first.stage !== owner.stage)
        throw new PipelineStageError(
          `stage ${stage}: ${first.name} (stage ${first.stage}) and ${owner.prefix}.${name} (stage ${owner.stage}) ` +
            'are one parameter: parameters tied across pipeline stages are not supported; untie them',
        );
      if (!first) seen.set(p, { name: `${owner.prefix}.${name}`, stage: owner.stage });
    }
  }
}

/** The stage's layers, registered under their index in the whole model so names match it. */
class LayerSlice extends Module {
  constructor(
    readonly items: TensorModule[],
    start: number,
  ) {
    super();
    for (const [i, m] of items.entries()) this.registerModule(String(start + i), m);
  }
  forward(x: Tensor): Tensor {
    return this.items.reduce((h, layer) => layer.forward(h), x);
  }
}

/**
 * One pipeline stage of a model: the first stage keeps the embedding, the last the head and
 * the loss, each its share of the layers. Parameter names are those of the whole model
 * (`embedding.weight`, `layers.3.attn.in_proj_weight`, `head.1.bias`), so a stage's state
 * can be compared with, or loaded from, the unsplit model (a stage of a 1-stage pipeline).
 *
 * The stage takes ownership of `parts`: what it does not keep is disposed. Parameters tied
 * across stages are refused (PipelineStageError).
 */
export class PipelineStage extends Module {
  readonly embedding: PipelineParts['embedding'] | null;
  readonly layers: LayerSlice;
  readonly head: TensorModule | null;
  readonly layerRange: [number, number];
  private readonly lossFn: PipelineParts['lossFn'];

  constructor(
    parts: PipelineParts,
    readonly stage: number,
    readonly numStages: number,
  ) {
    super();
    // tensor-parallel layers compute asynchronously (their all-reduces are awaited), and a stage's
    // forward is synchronous: they failed in the first step with an untyped "tidy() takes a
    // synchronous function", the pending all-reduce outliving the process group
    const sharded = [parts.embedding, ...parts.layers, parts.head].find((m) =>
      m.parameters().some((p) => parameterShardOf(p) !== undefined),
    );
    if (sharded)
      throw new PipelineStageError(
        `stage ${stage}: ${sharded.constructor.name} holds tensor-parallel shards: pipeline stages run ` +
          'synchronous layers, and tensor parallelism inside a stage is not supported',
      );
    this.layerRange = distributeLayers(parts.layers.length, numStages, stage);
    const [start, end] = this.layerRange;
    refuseTiedAcrossStages(parts, numStages, stage);
    this.embedding = this.registerModule('embedding', this.isFirst ? parts.embedding : null);
    this.layers = this.registerModule('layers', new LayerSlice(parts.layers.slice(start, end), start));
    this.head = this.registerModule('head', this.isLast ? parts.head : null);
    this.lossFn = parts.lossFn;
    if (!this.isFirst) parts.embedding.dispose();
    if (!this.isLast) parts.head.dispose();
    for (const [i, layer] of parts.layers.entries()) if (i < start || i >= end) layer.dispose();
  }

  get isFirst(): boolean {
    return this.stage === 0;
  }
  get isLast(): boolean {
    return this.stage === this.numStages - 1;
  }

  /** Token ids on the first stage, the previous stage's activation elsewhere. */
  forward(input: Indices | Tensor): Tensor {
    let x: Tensor;
    if (this.embedding) x = this.embedding.forward(input);
    else if (input instanceof Tensor) x = input;
    else
      throw new PipelineStageError(
        `stage ${this.stage}: a stage after the first takes the previous stage's activation (a Tensor)`,
      );
    x = this.layers.forward(x);
    return this.head ? this.head.forward(x) : x;
  }

  /** The loss of the output of the last stage. */
  loss(output: Tensor, target: Indices): Tensor {
    if (!this.isLast)
      throw new PipelineStageError(
        `stage ${this.stage} of ${this.numStages} is not the last stage; only it computes the loss`,
      );
    return this.lossFn(output, target);
  }
}

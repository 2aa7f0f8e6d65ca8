import { checkpoint, fromTf, type Tensor } from '@ddp/autograd';
import {
  Conv2d,
  Embedding,
  Flatten,
  type Generator,
  LayerNorm,
  Linear,
  Module,
  Parameter,
  ReLU,
  Sequential,
  TransformerBlock,
} from '@ddp/nn';
import type { tf } from '@ddp/tensor';

export interface ClipModelOptions {
  /** Width of the shared embedding space. */
  embedDim?: number;
  /** Width of the text transformer. */
  textDim?: number;
  /** Recompute the image trunk and the transformer block in backward instead of keeping activations. */
  gradCheckpointing?: boolean;
  generator: Generator;
}

/**
 * A tiny CLIP: a CNN over 28×56 two-digit images, a one-block transformer over the caption's
 * two word tokens (with learned positions, so "three seven" ≠ "seven three"), linear
 * projections into a shared space, and CLIP's learnable log temperature (init ln(1/0.07)).
 */
export class ClipModel extends Module {
  readonly imageStem: Sequential;
  readonly imageBody: Sequential;
  readonly imageProj: Linear;
  readonly tokenEmbedding: Embedding;
  readonly positions: Parameter;
  readonly textBlock: TransformerBlock;
  readonly textNorm: LayerNorm;
  readonly textProj: Linear;
  readonly logitScale: Parameter;
  gradCheckpointing: boolean;

  constructor({ embedDim = 64, textDim = 32, gradCheckpointing = false, generator }: ClipModelOptions) {
    super();
    this.gradCheckpointing = gradCheckpointing;
    this.imageStem = this.registerModule(
      'imageStem',
      new Sequential(new Conv2d(1, 16, 5, { stride: 2, padding: 2, generator }), new ReLU()),
    ); // → 16 × 14 × 28
    this.imageBody = this.registerModule(
      'imageBody',
      // → 32 × 7 × 14
      new Sequential(new Conv2d(16, 32, 3, { stride: 2, padding: 1, generator }), new ReLU(), new Flatten()),
    );
    this.imageProj = this.registerModule('imageProj', new Linear(32 * 7 * 14, embedDim, { generator }));
    this.tokenEmbedding = this.registerModule('tokenEmbedding', new Embedding(10, textDim, { generator }));
    this.positions = this.registerParameter(
      'positions',
      Parameter.fromValues(generator.normal(2 * textDim, 0, 0.02), [2, textDim]),
    );
    this.textBlock = this.registerModule('textBlock', new TransformerBlock(textDim, 2, { causal: false, generator }));
    this.textNorm = this.registerModule('textNorm', new LayerNorm(textDim));
    this.textProj = this.registerModule('textProj', new Linear(2 * textDim, embedDim, { generator }));
    this.logitScale = this.registerParameter(
      'logitScale',
      Parameter.fromValues(Float32Array.of(Math.log(1 / 0.07)), []),
    );
  }

  /** Image embeddings [B, embedDim] of images [B, 1, 28, 56] (not normalised: the loss does it). */
  encodeImage(images: Tensor): Tensor {
    // checkpoint needs an input that requires grad (the images do not): it starts after the stem
    const stem = this.imageStem.forward(images);
    const body = (x: Tensor) => this.imageBody.forward(x);
    return this.imageProj.forward(this.gradCheckpointing ? checkpoint(body, stem) : body(stem));
  }

  /** Text embeddings [B, embedDim] of word tokens [B, 2]. */
  encodeText(tokens: tf.Tensor): Tensor {
    const h = this.tokenEmbedding.forward(tokens).add(this.positions);
    const block = (x: Tensor) => this.textNorm.forward(this.textBlock.forward(x));
    const out = this.gradCheckpointing ? checkpoint(block, h) : block(h);
    return this.textProj.forward(out.reshape([tokens.shape[0], -1]));
  }

  forward(images: tf.Tensor, tokens: tf.Tensor): { image: Tensor; text: Tensor } {
    return { image: this.encodeImage(fromTf(images)), text: this.encodeText(tokens) };
  }
}

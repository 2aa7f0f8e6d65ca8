import type { Tensor } from '@ddp/autograd';

/**
 * Awaits `result` (a tensor already made passes as is), then disposes `intermediates`, this async
 * forward's own tensors (tidy takes synchronous functions only; a graph keeps what its backward
 * needs): left alive, each forward's partial outputs kept their data under noGrad, and their graph
 * after the caller disposed an output it never backwarded. One that is the result itself (an
 * identity: dropout in eval) is kept.
 */
export async function freeAfter(result: Tensor | Promise<Tensor>, ...intermediates: Tensor[]): Promise<Tensor> {
  let out: Tensor | undefined;
  try {
    out = await result;
    return out;
  } finally {
    for (const t of new Set(intermediates)) if (t !== out) t.dispose();
  }
}

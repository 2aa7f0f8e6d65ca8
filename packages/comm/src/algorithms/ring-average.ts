import type { NumArray } from '../dtypes.js';
import type { OpContext } from '../execution/op-context.js';
import type { FrameHeader } from '../transport/frame.js';

/** The all-gather frames of a chunk whose average overflowed carry this in `aux`. */
const OVERFLOWED = 1;

/**
 * AVG on the ring without overflow to ±Infinity (the rule of finishAverage). The ring sums
 * hop by hop, so only a chunk's owner sees its sum, and nobody holds the other ranks' inputs.
 * So for AVG the reduce-scatter leaves every rank's input in place (partial sums go to a
 * scratch buffer); an owner whose average comes out ±Infinity notes its own inputs there and
 * flags its chunk in the all-gather's frames; every rank copies its input of a flagged
 * segment aside before the result lands on it. Afterwards every rank knows the same flagged
 * elements (those still ±Infinity), and all ranks all-reduce Σ (x_r / N) over exactly those
 * and put it in place. Without an overflow nothing changes: the same sums, bit for bit, and
 * no extra message.
 */
export class RingAverage {
  /** This rank's input at each element whose average overflowed, by element index. */
  private readonly inputs = new Map<number, number>();
  /** This rank's input of flagged segments received: [first element, values]. */
  private readonly saved: [number, number[]][] = [];
  private flagged = false;

  constructor(
    /** Element size in the all-gather's bytes. */
    private readonly bpe: number,
    /** This rank's input (still in place) at element i, as a number. */
    private readonly inputAt: (i: number) => number,
  ) {}

  /** The owner's average at element i came out ±Infinity: keep its input there. */
  note(i: number): void {
    this.inputs.set(i, this.inputAt(i));
    this.flagged = true;
  }

  /** What ringAllGather needs: the flag for this rank's chunk, and a look at every frame received. */
  allGatherHooks(base: Uint8Array): { aux: number; onHeader: (h: FrameHeader, dst: Uint8Array) => void } {
    return {
      aux: this.flagged ? OVERFLOWED : 0,
      onHeader: (h, dst) => {
        if (h.aux !== OVERFLOWED) return;
        this.flagged = true;
        const first = (dst.byteOffset - base.byteOffset) / this.bpe;
        this.saved.push([first, Array.from({ length: dst.byteLength / this.bpe }, (_, k) => this.inputAt(first + k))]);
      },
    };
  }

  /**
   * After the all-gather: every rank has the same results, so the same ±Infinity elements in
   * flagged chunks. Sums x_r / N over the ranks for them with `allSum` (in the arithmetic's
   * array type, `Scratch`) and hands each to `put`.
   */
  async finish(
    ctx: OpContext,
    isInfinite: (i: number) => boolean,
    Scratch: new (n: number) => NumArray,
    allSum: (v: NumArray) => Promise<void>,
    put: (i: number, v: number) => void,
  ): Promise<void> {
    if (!this.flagged) return;
    for (const [first, values] of this.saved) {
      for (let k = 0; k < values.length; k++) {
        if (isInfinite(first + k)) this.inputs.set(first + k, values[k]);
      }
    }
    const at = [...this.inputs.keys()].filter(isInfinite).sort((a, b) => a - b);
    const divided = new Scratch(at.length);
    at.forEach((i, k) => {
      divided[k] = (this.inputs.get(i) as number) / ctx.size;
    });
    await allSum(divided);
    for (let k = 0; k < at.length; k++) put(at[k], divided[k]);
  }
}

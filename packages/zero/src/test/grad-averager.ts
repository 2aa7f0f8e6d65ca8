import { GradientSnapshot, type Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { type Joinable, type JoinHook, notifyJoinContext } from '@ddp/join';
import { tf } from '@ddp/tensor';

/**
 * Test stand-in for DDP's gradient sync: all-reduces every gradient and divides by the
 * initial world size. Joinable: a joined rank contributes zeros and keeps the averaged
 * result as its gradient while joined (so ZeRO's joined rank steps its shard with the true average).
 */
export class GradAverager implements Joinable {
  constructor(
    private readonly params: Tensor[],
    readonly joinProcessGroup: ProcessGroup,
  ) {}

  /** Called before forward, like DDP's forward: the iteration's join flag. */
  startIteration(): Promise<number | null> {
    return notifyJoinContext(this);
  }

  async average(zeros = false): Promise<void> {
    const group = this.joinProcessGroup;
    const bufs = this.params.map((p) =>
      zeros || p.grad === null ? new Float32Array(p.size) : Float32Array.from(p.grad.dataSync()),
    );
    const works = bufs.map((b) => group.allReduce(b));
    for (const w of works) await w.wait();
    this.params.forEach((p, i) => {
      const buf = bufs[i];
      for (let j = 0; j < buf.length; j++) buf[j] /= group.size;
      p.grad = tf.tensor(buf, p.shape, 'float32');
    });
  }

  /** As DDP's: a joined rank's own gradients are given back after join (the shadows' averages stayed in them). */
  joinHook(): JoinHook {
    let before: GradientSnapshot | null = null;
    return {
      mainHook: () => {
        before ??= new GradientSnapshot(this.params);
        return this.average(true);
      },
      postHook: () => {
        before?.restore();
      },
    };
  }
}

import { AutogradFunction, type Context, type Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { tf } from '@ddp/tensor';

const FORWARD_TAG = 7301;
const BACKWARD_TAG = 7302;

const neighbours = (group: ProcessGroup) => ({
  next: (group.rank + 1) % group.size,
  prev: (group.rank - 1 + group.size) % group.size,
});

/**
 * Sends x to the next rank of the ring and receives the previous rank's block (rowsIn rows);
 * the backward sends the gradient the other way (it belongs to the rank x came from). The
 * transfer is posted before forward first awaits, so it runs on the comm thread while the
 * caller keeps computing on this one.
 */
class RingExchange extends AutogradFunction {
  private group!: ProcessGroup;
  private sentShape: number[] = [];
  async forward(_ctx: Context, x: tf.Tensor, group: ProcessGroup, rowsIn: number): Promise<tf.Tensor> {
    this.group = group;
    this.sentShape = x.shape;
    const rest = x.shape.slice(1);
    const incoming = new Float32Array(rowsIn * rest.reduce((a, b) => a * b, 1));
    const { next, prev } = neighbours(group);
    const work = group.batchIsendIrecv([
      { op: 'isend', buf: Float32Array.from(x.dataSync()), peer: next, tag: FORWARD_TAG },
      { op: 'irecv', buf: incoming, peer: prev, tag: FORWARD_TAG },
    ]);
    await work.wait();
    return tf.tensor(incoming, [rowsIn, ...rest]);
  }
  async backward(_ctx: Context, dy: tf.Tensor) {
    const { group, sentShape } = this;
    const { next, prev } = neighbours(group);
    const dx = new Float32Array(sentShape.reduce((a, b) => a * b, 1));
    const dyHost = Float32Array.from((await dy.data()) as Float32Array);
    await group
      .batchIsendIrecv([
        { op: 'isend', buf: dyHost, peer: prev, tag: BACKWARD_TAG },
        { op: 'irecv', buf: dx, peer: next, tag: BACKWARD_TAG },
      ])
      .wait();
    return [tf.tensor(dx, sentShape), null, null];
  }
}

/**
 * Differentiable neighbour exchange (open_clip's NeighbourExchange): resolves with the previous
 * rank's block of rowsIn rows. The send is already in flight when this returns.
 */
export const ringExchange = (x: Tensor, group: ProcessGroup, rowsIn: number): Promise<Tensor> =>
  RingExchange.applyAsync<Tensor>(x, group, rowsIn);

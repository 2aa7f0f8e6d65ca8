import type { Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import type { Module } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { DDPUsageError, ParameterMismatchError } from './errors.js';

/** [count, then per parameter: rank, dims...] — what must agree across ranks. */
function describe(params: readonly [string, Tensor][]): Int32Array {
  const out = [params.length];
  for (const [, p] of params) out.push(p.shape.length, ...p.shape);
  return Int32Array.from(out);
}

function decode(desc: Int32Array): number[][] {
  const shapes: number[][] = [];
  for (let i = 1; i < desc.length; ) {
    const rank = desc[i];
    shapes.push([...desc.subarray(i + 1, i + 1 + rank)]);
    i += 1 + rank;
  }
  return shapes;
}

/**
 * Checks that every rank holds parameters of the same shapes, in the same order; raises
 * ParameterMismatchError (on every rank) naming the first that differs and the ranks.
 */
export async function verifyParameterShapes(params: readonly [string, Tensor][], group: ProcessGroup): Promise<void> {
  const all = (await group.allGather(describe(params)).wait()) as Int32Array[];
  const shapes = all.map(decode);
  const mine = shapes[group.rank];
  for (let r = 1; r < shapes.length; r++) {
    const other = shapes[r];
    const ref = shapes[0];
    const n = Math.max(ref.length, other.length);
    for (let i = 0; i < n; i++) {
      const a = ref[i];
      const b = other[i];
      if (a !== undefined && b !== undefined && tf.util.arraysEqual(a, b)) continue;
      const name = params[i]?.[0] ?? `#${i}`;
      const show = (s: number[] | undefined) => (s ? `[${s.join(', ')}]` : 'absent');
      const ranks = [group.ranks[0], group.ranks[r]];
      throw new ParameterMismatchError(
        name,
        ranks,
        `shape ${show(a)} on rank ${ranks[0]}, ${show(b)} on rank ${ranks[1]} (rank ` +
          `${group.ranks[group.rank]} has ${mine.length} parameters)`,
      );
    }
  }
}

/** Overwrites every tensor's values with `src`'s: one broadcast per dtype, from flat buffers. */
export async function broadcastTensors(tensors: readonly Tensor[], group: ProcessGroup, src: number): Promise<void> {
  for (const dtype of ['float32', 'int32'] as const) {
    const list = tensors.filter((t) => t.dtype === dtype);
    if (list.length === 0) continue;
    const Ctor = dtype === 'float32' ? Float32Array : Int32Array;
    const flat = new Ctor(list.reduce((n, t) => n + t.size, 0));
    let offset = 0;
    for (const t of list) {
      flat.set(t.dataSync() as Float32Array & Int32Array, offset);
      offset += t.size;
    }
    await group.broadcast(flat, { src }).wait();
    offset = 0;
    for (const t of list) {
      t.data = tf.tensor(flat.slice(offset, offset + t.size), t.shape, dtype);
      offset += t.size;
    }
  }
}

/** The module's buffers that hold a tensor (a registered buffer may be null). */
export const buffersOf = (module: Module): Tensor[] => module.buffers().filter((b): b is Tensor => b !== null);

/** Parameters (then buffers) of module, as DDP broadcasts them. */
export function moduleState(module: Module, withBuffers: boolean): Tensor[] {
  return [...module.parameters(), ...(withBuffers ? buffersOf(module) : [])];
}

/**
 * Refuses a forward after a parameter's requiresGrad changed since the wrapper hooked the
 * trainable ones: one unfrozen later (fine-tuning's second phase) would keep its local gradient
 * and the ranks would step apart silently; one frozen later would leave its bucket waiting.
 */
export function checkTrainableUnchanged(module: Module, hooked: ReadonlySet<Tensor>, who: string, rank: number): void {
  // every forward: compare flags only; the names are built when something changed
  if (module.parameters().every((p) => p.requiresGrad === hooked.has(p))) return;
  const changed = module.namedParameters().filter(([, p]) => p.requiresGrad !== hooked.has(p));
  const names = changed.map(([name, p]) => `${name} (now ${p.requiresGrad ? 'trainable' : 'frozen'})`);
  throw new DDPUsageError(
    `${who}.forward (rank ${rank}): requiresGrad changed since create for ${names.join(', ')}; ` +
      `wrap the module again after freezing or unfreezing parameters`,
  );
}

import type { Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import type { Module } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { DDPUsageError, ParameterMismatchError } from './errors.js';

/** [count, per parameter: name length, its UTF-16 units; then per parameter: rank, dims…]: what ranks must share. */
function describe(params: readonly [string, Tensor][]): Int32Array {
  const out = [params.length];
  for (const [name] of params)
    out.push(name.length, ...Array.from({ length: name.length }, (_, i) => name.charCodeAt(i)));
  for (const [, p] of params) out.push(p.shape.length, ...p.shape);
  return Int32Array.from(out);
}

function decode(desc: Int32Array): { names: string[]; shapes: number[][] } {
  const count = desc[0];
  const names: string[] = [];
  let i = 1;
  for (let k = 0; k < count; k++) {
    names.push(String.fromCharCode(...desc.subarray(i + 1, i + 1 + desc[i])));
    i += 1 + desc[i];
  }
  const shapes: number[][] = [];
  for (; i < desc.length; i += 1 + desc[i]) shapes.push([...desc.subarray(i + 1, i + 1 + desc[i])]);
  return { names, shapes };
}

/**
 * Checks that every rank holds the same parameters (names and shapes) in the same order;
 * raises ParameterMismatchError (on every rank) naming the first that differs and the ranks.
 * DDP pairs parameters by position, so same-shaped ones in another order on one rank (created
 * or registered otherwise) would take each other's weights and gradients without a word.
 */
export async function verifyParameterShapes(params: readonly [string, Tensor][], group: ProcessGroup): Promise<void> {
  const all = ((await group.allGather(describe(params)).wait()) as Int32Array[]).map(decode);
  const mine = all[group.rank].shapes;
  for (let r = 1; r < all.length; r++) {
    const [ref, other] = [all[0], all[r]];
    const ranks = [group.ranks[0], group.ranks[r]];
    const n = Math.max(ref.shapes.length, other.shapes.length);
    for (let i = 0; i < n; i++) {
      const a = ref.shapes[i];
      const b = other.shapes[i];
      const name = ref.names[i] ?? other.names[i] ?? `#${i}`;
      if (a !== undefined && b !== undefined && tf.util.arraysEqual(a, b)) {
        if (ref.names[i] === other.names[i]) continue;
        throw new ParameterMismatchError(
          name,
          ranks,
          `parameter ${i} is "${ref.names[i]}" on rank ${ranks[0]}, "${other.names[i]}" on rank ${ranks[1]} ` +
            '(created or registered in another order?): DDP pairs parameters by position',
        );
      }
      const show = (s: number[] | undefined) => (s ? `[${s.join(', ')}]` : 'absent');
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

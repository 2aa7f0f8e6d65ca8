import { parameterShardOf, type Tensor } from '@ddp/autograd';
import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import { kindOf, loadedSaveOf, type Module, saveFingerprint } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { DDPUsageError, ParameterMismatchError } from './errors.js';

/**
 * [count; per parameter: requires grad (0/1), name length, its UTF-16 units; then per parameter:
 * rank, dims…]: what every rank must share.
 */
function describe(params: readonly [string, Tensor][]): Int32Array {
  const out = [params.length];
  for (const [name, p] of params)
    out.push(p.requiresGrad ? 1 : 0, name.length, ...Array.from({ length: name.length }, (_, i) => name.charCodeAt(i)));
  for (const [, p] of params) out.push(p.shape.length, ...p.shape);
  return Int32Array.from(out);
}

interface Described {
  names: string[];
  trainable: boolean[];
  shapes: number[][];
}

function decode(desc: Int32Array): Described {
  const { names, trainable, shapes }: Described = { names: [], trainable: [], shapes: [] };
  let i = 1;
  for (let k = 0; k < desc[0]; k++) {
    trainable.push(desc[i] === 1);
    names.push(String.fromCharCode(...desc.subarray(i + 2, i + 2 + desc[i + 1])));
    i += 2 + desc[i + 1];
  }
  for (; i < desc.length; i += 1 + desc[i]) shapes.push([...desc.subarray(i + 1, i + 1 + desc[i])]);
  return { names, trainable, shapes };
}

/** How parameter `i` differs between ranks `ranks` (described `a` and `b`), or null. */
function difference(a: Described, b: Described, i: number, ranks: number[]): string | null {
  const [x, y] = [a.shapes[i], b.shapes[i]];
  if (x === undefined || y === undefined || !tf.util.arraysEqual(x, y)) {
    const show = (s: number[] | undefined) => (s ? `[${s.join(', ')}]` : 'absent');
    return `shape ${show(x)} on rank ${ranks[0]}, ${show(y)} on rank ${ranks[1]}`;
  }
  if (a.names[i] !== b.names[i])
    return (
      `parameter ${i} is "${a.names[i]}" on rank ${ranks[0]}, "${b.names[i]}" on rank ${ranks[1]} ` +
      '(created or registered in another order?): DDP pairs parameters by position'
    );
  if (a.trainable[i] !== b.trainable[i]) {
    const state = (t: boolean) => (t ? 'requires grad' : 'is frozen');
    return (
      `it ${state(a.trainable[i])} on rank ${ranks[0]} and ${state(b.trainable[i])} on rank ${ranks[1]}: ` +
      'freeze the same parameters on every rank'
    );
  }
  return null;
}

/**
 * Checks that every rank holds the same parameters (names, shapes, requiresGrad) in the same
 * order; raises ParameterMismatchError (on every rank) naming the first that differs and the
 * ranks. DDP pairs parameters by position, so same-shaped ones in another order on one rank
 * (created or registered otherwise), or frozen on some ranks only, would take each other's
 * weights and gradients without a word.
 */
async function verifyParameterShapes(params: readonly [string, Tensor][], group: ProcessGroup): Promise<void> {
  const all = ((await group.allGather(describe(params)).wait()) as Int32Array[]).map(decode);
  const count = all[group.rank].shapes.length;
  for (let r = 1; r < all.length; r++) {
    const ranks = [group.ranks[0], group.ranks[r]];
    const n = Math.max(all[0].shapes.length, all[r].shapes.length);
    for (let i = 0; i < n; i++) {
      const detail = difference(all[0], all[r], i, ranks);
      if (detail === null) continue;
      const name = all[0].names[i] ?? all[r].names[i] ?? `#${i}`;
      const shapes = detail.startsWith('shape') ? ` (rank ${group.ranks[group.rank]} has ${count} parameters)` : '';
      throw new ParameterMismatchError(name, ranks, detail + shapes);
    }
  }
}

const FSDP_ADVICE = "FSDP reduces its shards' gradients itself: train fullyShard's root without DDP";

/**
 * Refuses what is not an nn Module (fullyShard's FSDPModule, a tf.LayersModel) and a module whose
 * parameters are freed (the module fullyShard sharded): DDP failed untyped reading them
 * (`module.namedParameters is not a function`, TensorDisposedError). `trainable`: also one with no
 * parameter that requires grad (nothing to synchronise).
 */
export function checkModule(module: unknown, who: string, { trainable = false } = {}): void {
  if (typeof (module as Module | null)?.namedParameters !== 'function') {
    const kind = kindOf(module);
    throw new DDPUsageError(
      `${who}: the module (${kind}) is not an nn Module${kind === 'FSDPModule' ? `: ${FSDP_ADVICE}` : ''}`,
    );
  }
  const freed = (module as Module).namedParameters().find(([, p]) => p.isDisposed);
  if (freed !== undefined) {
    const why = freed[1].freedBy ?? 'dispose()';
    throw new DDPUsageError(
      `${who}: parameter ${freed[0]} is freed (${why})${why.startsWith('fsdp') ? `; ${FSDP_ADVICE}` : ''}`,
    );
  }
  if (trainable && !(module as Module).namedParameters().some(([, p]) => p.requiresGrad))
    throw new DDPUsageError(`${who}: the module has no parameter that requires grad; there is nothing to synchronise`);
}

/**
 * Refuses a group that holds two parts of one tensor-parallel shard (DDP over the world where the
 * data-parallel group was meant): its broadcast copied rank 0's shard over the other tp ranks'
 * and its all-reduce would average different parts, silently (AdasumOptimizer's combine them).
 * Collective (one small all-reduce): every rank raises, naming the first such parameter (the
 * names agree once verified).
 */
export async function refuseSpanningShards(
  params: readonly [string, Tensor][],
  group: ProcessGroup,
  who: string,
  error: (message: string) => Error = (message) => new DDPUsageError(message),
): Promise<void> {
  const members = new Set(group.ranks);
  const parts = (p: Tensor) => parameterShardOf(p)?.ranks.filter((r) => members.has(r)) ?? [];
  const first = Int32Array.of(params.findIndex(([, p]) => parts(p).length > 1) + 1);
  await group.allReduce(first, { op: ReduceOp.MAX }).wait();
  if (first[0] === 0) return;
  const [name, param] = params[first[0] - 1];
  const shard = parameterShardOf(param);
  throw error(
    `rank ${group.ranks[group.rank]}: ${who}: parameter ${name} is a tensor-parallel shard ` +
      `(here part of ranks [${shard?.ranks ?? '…'}]), and the group [${group.ranks}] holds several parts of one ` +
      'shard: different parts would be mixed. Use the data-parallel group (grid.dpGroup)',
  );
}

/** How each dtype a module may hold travels in a broadcast (bool as 0/1 words). */
const WIRE = { float32: Float32Array, int32: Int32Array, bool: Int32Array } as const;

/**
 * Overwrites every tensor's values with `src`'s: one broadcast per dtype, from flat buffers.
 * Every dtype goes (torch broadcasts every buffer): a bool mask skipped here stayed rank-local.
 */
export async function broadcastTensors(tensors: readonly Tensor[], group: ProcessGroup, src: number): Promise<void> {
  for (const dtype of [...new Set(tensors.map((t) => t.dtype))].sort()) {
    if (!(dtype in WIRE))
      throw new DDPUsageError(`rank ${group.rank}: cannot broadcast a ${dtype} parameter or buffer from rank ${src}`);
    const list = tensors.filter((t) => t.dtype === dtype);
    const Ctor = WIRE[dtype as keyof typeof WIRE];
    const flat = new Ctor(list.reduce((n, t) => n + t.size, 0));
    let offset = 0;
    for (const t of list) {
      flat.set(t.dataSync() as ArrayLike<number>, offset);
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

/**
 * Parameters, then buffers, of module: what DDP broadcasts at create and after join. Buffers
 * always (torch's _sync_module_states ignores broadcast_buffers, which is about every step).
 */
export function moduleState(module: Module): Tensor[] {
  return [...module.parameters(), ...buffersOf(module)];
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
  // a GAN's generator step freezes the discriminator for one pass (probe BO): say how to do that here
  const onePass = changed.some(([, p]) => !p.requiresGrad)
    ? "; to keep them out of one pass (a GAN's generator step), call the wrapped module's own forward for it"
    : '';
  throw new DDPUsageError(
    `${who}.forward (rank ${rank}): requiresGrad changed since create for ${names.join(', ')}; ` +
      `dispose() this wrapper and wrap the module again after freezing or unfreezing parameters${onePass}`,
  );
}

/**
 * What wrapping a module does first, on every rank of `group`: checks the parameters agree
 * (names, shapes, requiresGrad) and that no tensor-parallel shard has two parts in the group,
 * then copies rank 0's parameters and buffers everywhere. Collective.
 */
export async function syncInitialState(module: Module, group: ProcessGroup, who: string): Promise<void> {
  await refuseOtherSaves(module, group, who);
  await verifyParameterShapes(module.namedParameters(), group);
  await refuseSpanningShards(module.namedParameters(), group, who);
  await broadcastTensors(moduleState(module), group, 0);
}

/**
 * Refuses ranks whose module was loaded from different checkpoint saves (nn's loadedSaveOf; a rank
 * that loaded none passes: rank 0's weights are broadcast). Each rank resolves the newest entry by
 * itself, and a save committed between their loads resumed them at different steps, silently.
 */
async function refuseOtherSaves(module: Module, group: ProcessGroup, who: string): Promise<void> {
  const mine = loadedSaveOf(module);
  const all = (await group.allGather(Int32Array.of(saveFingerprint(mine))).wait()) as Int32Array[];
  if (new Set(all.map((a) => a[0]).filter((c) => c !== 0)).size <= 1) return;
  throw new DDPUsageError(
    `${who} (rank ${group.ranks[group.rank]}): the ranks loaded their module from different checkpoint saves ` +
      `(this rank: ${mine?.path ?? 'none'}): each resolved the directory's newest by itself (a save committed ` +
      'between the loads, or a file system listing it late on one node); load one entry on every rank: the path ' +
      "rank 0's load returned, broadcast to the others",
  );
}

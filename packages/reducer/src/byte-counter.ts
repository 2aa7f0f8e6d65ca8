import type { CommArray, ProcessGroup } from '@ddp/comm';

/** Payload bytes handed to collectives (what each rank contributes; a ring all-reduce sends 2(N−1)/N of it). */
export class ByteCounter {
  bytes = 0;
  collectives = 0;
  reset(): void {
    this.bytes = 0;
    this.collectives = 0;
  }
}

/** Which argument of each ProcessGroup method is the payload this rank contributes. */
const payloadArg: Record<string, number> = { allReduce: 0, broadcast: 0, allGather: 0, reduce: 0, send: 0, gather: 0, allGatherInto: 1, reduceScatter: 1 };

/** A view of `group` whose collectives add their payload bytes to `counter`. */
export function countingGroup(group: ProcessGroup, counter: ByteCounter): ProcessGroup {
  return new Proxy(group, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      const arg = typeof prop === 'string' ? payloadArg[prop] : undefined;
      return (...args: unknown[]) => {
        if (arg !== undefined) {
          counter.bytes += (args[arg] as CommArray).byteLength;
          counter.collectives++;
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

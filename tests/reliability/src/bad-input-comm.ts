import {
  destroyProcessGroup,
  getDefaultGroup,
  getRank,
  initProcessGroup,
  isInitialized,
  newGroup,
  TCPStore,
} from '@ddp/comm';
import { type BadInputCase, world } from './bad-input.js';

/** Bad-input rows for comm: process groups, the store, collectives. The getRank row must run first (no world yet). */
export const COMM_CASES: BadInputCase[] = [
  {
    pkg: 'comm',
    entry: 'getRank',
    input: 'before initProcessGroup',
    expect: 'NotInitializedError',
    call: () => (isInitialized() ? Promise.reject(new Error('test order: world already up')) : getRank()),
  },
  {
    pkg: 'comm',
    entry: 'initProcessGroup',
    input: 'rank 3 in a world of 2',
    expect: 'InvalidArgumentError',
    call: () => initProcessGroup({ rank: 3, worldSize: 2 }),
  },
  {
    pkg: 'comm',
    entry: 'initProcessGroup',
    input: 'worldSize -1',
    expect: 'InvalidArgumentError',
    call: () => initProcessGroup({ rank: 0, worldSize: -1 }),
  },
  {
    pkg: 'comm',
    entry: 'initProcessGroup',
    input: 'timeoutMs -5',
    expect: 'InvalidArgumentError',
    call: async () => {
      await initProcessGroup({ rank: 0, worldSize: 1, timeoutMs: -5 });
      return await destroyProcessGroup();
    },
  },
  {
    pkg: 'comm',
    entry: 'TCPStore.create',
    input: 'port -1',
    expect: 'InvalidArgumentError',
    call: () => TCPStore.create({ host: '127.0.0.1', port: -1, secret: 's', timeoutMs: 1000 }),
  },
  {
    pkg: 'comm',
    entry: 'ProcessGroup.allReduce',
    input: 'a Uint8Array (unsupported dtype)',
    expect: 'InvalidArgumentError',
    call: async () => {
      await world();
      return getDefaultGroup()
        .allReduce(new Uint8Array(4) as unknown as Float32Array)
        .wait();
    },
  },
  {
    pkg: 'comm',
    entry: 'ProcessGroup.allReduce',
    input: "op 'median'",
    expect: 'InvalidArgumentError',
    call: async () => {
      await world();
      return getDefaultGroup()
        .allReduce(new Float32Array(4), { op: 'median' as 'sum' })
        .wait();
    },
  },
  {
    pkg: 'comm',
    entry: 'ProcessGroup.broadcast',
    input: 'src 5 in a world of 1',
    expect: 'InvalidArgumentError',
    call: async () => {
      await world();
      return getDefaultGroup().broadcast(new Float32Array(4), { src: 5 }).wait();
    },
  },
  {
    pkg: 'comm',
    entry: 'ProcessGroup.reduceScatter',
    input: 'input of the wrong length',
    expect: 'InvalidArgumentError',
    call: async () => {
      await world();
      return getDefaultGroup().reduceScatter(new Float32Array(4), new Float32Array(3)).wait();
    },
  },
  {
    pkg: 'comm',
    entry: 'ProcessGroup.allGather',
    input: 'a plain number array',
    expect: 'InvalidArgumentError',
    call: async () => {
      await world();
      return getDefaultGroup()
        .allGather([1, 2] as unknown as Float32Array)
        .wait();
    },
  },
  {
    pkg: 'comm',
    entry: 'newGroup',
    input: 'rank 7 in a world of 1',
    expect: 'InvalidArgumentError',
    call: async () => {
      await world();
      return newGroup([7]);
    },
  },
];

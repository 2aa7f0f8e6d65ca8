import { add, crossEntropy, matmul, mse, reshape, tensor } from '@ddp/autograd';
import {
  destroyProcessGroup,
  getDefaultGroup,
  getRank,
  initProcessGroup,
  isInitialized,
  newGroup,
  TCPStore,
} from '@ddp/comm';
import { ArrayDataset, DataLoader, DistributedSampler, defaultCollate, loadMnist } from '@ddp/data';
import { join } from '@ddp/join';
import { planLaunch } from '@ddp/launch';
import {
  Adam,
  clipGradNorm,
  Generator,
  Linear,
  loadCheckpoint,
  parseSafetensors,
  Sequential,
  SGD,
  StepLR,
  Tanh,
} from '@ddp/nn';
import { dtypeInfo, setBackend, tensorFromTypedArray, tf } from '@ddp/tensor';

/**
 * Bad input at public entry points, one row per call. Each `call` must throw (or reject
 * with) a typed error: an Error subclass with its own name, not a bare Error/TypeError/
 * RangeError and not an error from a dependency (tfjs). `expect` is the error the
 * contract promises; `mustName`, when given, must appear in the message (DDP naming the
 * parameter, the launcher naming the option).
 */
export interface BadInputCase {
  pkg: string;
  entry: string;
  input: string;
  expect: string;
  mustName?: string;
  call: () => unknown;
}

const BUILTIN = new Set(['Error', 'TypeError', 'RangeError', 'SyntaxError', 'ReferenceError', 'AggregateError']);

export interface Outcome {
  threw: boolean;
  name: string;
  message: string;
  typed: boolean;
}

export async function attempt(c: BadInputCase): Promise<Outcome> {
  try {
    await c.call();
    return { threw: false, name: '(no error)', message: '', typed: false };
  } catch (e) {
    const name = e instanceof Error ? e.constructor.name : typeof e;
    const message = e instanceof Error ? e.message : String(e);
    const typed =
      e instanceof Error &&
      !BUILTIN.has(e.constructor.name) &&
      !BUILTIN.has(e.name) &&
      (!c.mustName || message.includes(c.mustName));
    return { threw: true, name, message: message.slice(0, 200), typed };
  }
}

export async function world(): Promise<void> {
  if (!isInitialized()) await initProcessGroup({ rank: 0, worldSize: 1, timeoutMs: 10_000 });
}

export const mlp = () => {
  const gen = new Generator(1);
  return new Sequential(new Linear(4, 3, { generator: gen }), new Tanh(), new Linear(3, 2, { generator: gen }));
};

export const params = () => mlp().parameters();

export const CASES: BadInputCase[] = [
  // comm
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
  // tensor
  {
    pkg: 'tensor',
    entry: 'tensorFromTypedArray',
    input: 'Float32Array as int32',
    expect: 'DTypeError',
    call: () => tensorFromTypedArray(new Float32Array(3), [3], 'int32'),
  },
  { pkg: 'tensor', entry: 'dtypeInfo', input: "'float8'", expect: 'DTypeError', call: () => dtypeInfo('float8') },
  {
    pkg: 'tensor',
    entry: 'setBackend',
    input: "'cuda'",
    expect: 'BackendError',
    call: () => setBackend('cuda' as 'cpu'),
  },
  // autograd
  {
    pkg: 'autograd',
    entry: 'matmul',
    input: '[2,3] @ [2,3]',
    expect: 'AutogradArgumentError',
    call: () => matmul(tensor([1, 2, 3, 4, 5, 6], [2, 3]), tensor([1, 2, 3, 4, 5, 6], [2, 3])),
  },
  {
    pkg: 'autograd',
    entry: 'add',
    input: '[2,3] + [4] (not broadcastable)',
    expect: 'AutogradArgumentError',
    call: () => add(tensor([1, 2, 3, 4, 5, 6], [2, 3]), tensor([1, 2, 3, 4], [4])),
  },
  {
    pkg: 'autograd',
    entry: 'reshape',
    input: '6 elements to [4]',
    expect: 'AutogradArgumentError',
    call: () => reshape(tensor([1, 2, 3, 4, 5, 6], [2, 3]), [4]),
  },
  {
    pkg: 'autograd',
    entry: 'mse',
    input: 'input [2,3], target [3,2]',
    expect: 'AutogradArgumentError',
    call: () => mse(tensor([1, 2, 3, 4, 5, 6], [2, 3]), tensor([1, 2, 3, 4, 5, 6], [3, 2])),
  },
  {
    pkg: 'autograd',
    entry: 'crossEntropy',
    input: 'label 9 with 3 classes',
    expect: 'AutogradArgumentError',
    call: () => crossEntropy(tensor([1, 2, 3], [1, 3]), [9]),
  },
  {
    pkg: 'autograd',
    entry: 'Tensor.backward',
    input: 'non-scalar output, no gradient given',
    expect: 'AutogradArgumentError',
    call: () => tensor([1, 2], [2], { requiresGrad: true }).mul(2).backward(),
  },
  {
    pkg: 'autograd',
    entry: 'Tensor.backward',
    input: 'gradient of the wrong shape',
    expect: 'AutogradArgumentError',
    call: () =>
      tensor([1, 2], [2], { requiresGrad: true })
        .mul(2)
        .backward(tf.ones([3])),
  },
  // nn
  { pkg: 'nn', entry: 'Linear', input: 'inFeatures -1', expect: 'ModuleError', call: () => new Linear(-1, 3) },
  { pkg: 'nn', entry: 'Linear', input: 'outFeatures 2.5', expect: 'ModuleError', call: () => new Linear(3, 2.5) },
  {
    pkg: 'nn',
    entry: 'Linear.forward',
    input: 'input [2,3] into Linear(4, 2)',
    expect: 'ModuleError',
    call: () => new Linear(4, 2).forward(tensor([1, 2, 3, 4, 5, 6], [2, 3])),
  },
  { pkg: 'nn', entry: 'SGD', input: 'lr -1', expect: 'OptimizerError', call: () => new SGD(params(), { lr: -1 }) },
  {
    pkg: 'nn',
    entry: 'SGD',
    input: 'lr missing',
    expect: 'OptimizerError',
    call: () => new SGD(params(), {} as { lr: number }),
  },
  {
    pkg: 'nn',
    entry: 'Adam',
    input: 'betas [1.5, 0.9]',
    expect: 'OptimizerError',
    call: () => new Adam(params(), { betas: [1.5, 0.9] }),
  },
  { pkg: 'nn', entry: 'Adam', input: 'eps -1', expect: 'OptimizerError', call: () => new Adam(params(), { eps: -1 }) },
  {
    pkg: 'nn',
    entry: 'clipGradNorm',
    input: 'maxNorm -1',
    expect: 'OptimizerError',
    call: () => clipGradNorm(params(), -1),
  },
  {
    pkg: 'nn',
    entry: 'StepLR',
    input: 'stepSize 0',
    expect: 'SchedulerError',
    call: () => new StepLR(new SGD(params(), { lr: 0.1 }), 0, 0.1),
  },
  {
    pkg: 'nn',
    entry: 'Module.loadStateDict',
    input: 'a weight of the wrong shape',
    expect: 'StateDictError',
    call: () =>
      new Linear(4, 2).loadStateDict(
        new Map([
          ['weight', tf.zeros([3, 3])],
          ['bias', tf.zeros([2])],
        ]),
      ),
  },
  {
    pkg: 'nn',
    entry: 'Generator',
    input: 'seed NaN',
    expect: 'GeneratorStateError',
    call: () => new Generator(Number.NaN),
  },
  {
    pkg: 'nn',
    entry: 'loadCheckpoint',
    input: 'a directory that does not exist',
    expect: 'CheckpointError',
    call: () => loadCheckpoint('/nonexistent/ckpt', { model: mlp() }),
  },
  {
    pkg: 'nn',
    entry: 'parseSafetensors',
    input: '16 random bytes',
    expect: 'SafetensorsError',
    call: () => parseSafetensors(new Uint8Array([200, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15])),
  },
  // data
  {
    pkg: 'data',
    entry: 'DataLoader',
    input: 'batchSize 0',
    expect: 'DataArgumentError',
    call: () => new DataLoader(new ArrayDataset([1, 2, 3]), { batchSize: 0 }),
  },
  {
    pkg: 'data',
    entry: 'DataLoader',
    input: 'batchSize -2',
    expect: 'DataArgumentError',
    call: () => new DataLoader(new ArrayDataset([1, 2, 3]), { batchSize: -2 }),
  },
  {
    pkg: 'data',
    entry: 'DistributedSampler',
    input: 'rank 5 of 2 replicas',
    expect: 'DataArgumentError',
    call: () => new DistributedSampler(10, { rank: 5, numReplicas: 2 }),
  },
  {
    pkg: 'data',
    entry: 'DistributedSampler',
    input: 'numReplicas -1',
    expect: 'DataArgumentError',
    call: () => new DistributedSampler(10, { rank: 0, numReplicas: -1 }),
  },
  {
    pkg: 'data',
    entry: 'DistributedSampler',
    input: 'dataset length -3',
    expect: 'DataArgumentError',
    call: () => new DistributedSampler(-3, { rank: 0, numReplicas: 1 }),
  },
  {
    pkg: 'data',
    entry: 'defaultCollate',
    input: 'samples of shapes [2] and [3]',
    expect: 'CollateError',
    call: () => defaultCollate([new Float32Array(2), new Float32Array(3)] as never),
  },
  {
    pkg: 'data',
    entry: 'loadMnist',
    input: 'a directory without MNIST',
    expect: 'DataError',
    call: () => loadMnist({ dir: '/nonexistent' } as never),
  },
  // launch
  {
    pkg: 'launch',
    entry: 'planLaunch',
    input: 'nprocPerNode 0',
    expect: 'LaunchConfigError',
    mustName: 'nprocPerNode',
    call: () => planLaunch({ script: 'x.ts', nprocPerNode: 0 }),
  },
  {
    pkg: 'launch',
    entry: 'planLaunch',
    input: 'maxRestarts -1',
    expect: 'LaunchConfigError',
    mustName: 'maxRestarts',
    call: () => planLaunch({ script: 'x.ts', nprocPerNode: 1, maxRestarts: -1 }),
  },
  {
    pkg: 'launch',
    entry: 'planLaunch',
    input: 'script missing',
    expect: 'LaunchConfigError',
    call: () => planLaunch({ script: '', nprocPerNode: 1 }),
  },
  {
    pkg: 'launch',
    entry: 'planLaunch',
    input: 'masterPort 70000',
    expect: 'LaunchConfigError',
    call: () => planLaunch({ script: 'x.ts', nprocPerNode: 1, masterPort: 70000 }),
  },
  // join
  {
    pkg: 'join',
    entry: 'join',
    input: 'no joinables',
    expect: 'JoinArgumentError',
    call: () => join([], async () => 1),
  },
];

import { add, crossEntropy, matmul, mse, reshape, tensor } from '@ddp/autograd';
import { dtypeInfo, setBackend, tensorFromTypedArray, tf } from '@ddp/tensor';
import type { BadInputCase } from './bad-input.js';

/** Bad-input rows for the math core: tensor (dtypes, backends) and autograd (shapes, backward). */
export const CORE_CASES: BadInputCase[] = [
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
];

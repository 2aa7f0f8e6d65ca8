import { add, conv2d, crossEntropy, matmul, maxPool2d, mse, randn, reshape, sum, tensor } from '@ddp/autograd';
import { dtypeInfo, setBackend, tensorFromTypedArray, tf } from '@ddp/tensor';
import type { BadInputCase } from './bad-input.js';

/** Bad-input rows for the math core: tensor (dtypes, backends) and autograd (shapes, backward). */
export const CORE_CASES: BadInputCase[] = [
  // options an op does not know were ignored: another result, silently (a sum over every element)
  {
    pkg: 'autograd',
    entry: 'sum',
    input: '{ axis: 1 } (tfjs spelling)',
    expect: 'AutogradArgumentError',
    call: () => sum(randn([2, 3], { seed: 0 }), { axis: 1 } as object),
  },
  {
    pkg: 'autograd',
    entry: 'conv2d',
    input: '{ dilation: 2 }',
    expect: 'AutogradArgumentError',
    call: () =>
      conv2d(randn([1, 1, 6, 6], { seed: 0 }), randn([1, 1, 3, 3], { seed: 1 }), null, { dilation: 2 } as object),
  },
  {
    pkg: 'autograd',
    entry: 'maxPool2d',
    input: '{ ceilMode: true }',
    expect: 'AutogradArgumentError',
    call: () => maxPool2d(randn([1, 1, 8, 8], { seed: 0 }), 3, { stride: 2, ceilMode: true } as object),
  },
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

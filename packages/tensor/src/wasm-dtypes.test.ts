import { describe, expect, it } from 'vitest';
import { setBackend, tf } from './index.js';
import { restoreBackendAfterAll } from './test/backend-paths.js';

restoreBackendAfterAll();

type Swept = 'bool' | 'int32';
const VALUES: Record<Swept, number[]> = { bool: [1, 0, 1, 0, 0, 1], int32: [3, -2, 0, 7, 1, -5] };
const tensor = (dtype: Swept | 'float32', reversed = false) => {
  const v = dtype === 'float32' ? [0.5, -2.5, 0, 3, 1e-3, -7] : VALUES[dtype];
  return tf.tensor(reversed ? [...v].reverse() : v, [2, 3], dtype);
};
const ops = tf as unknown as Record<string, (...args: unknown[]) => tf.Tensor>;

/** tfjs's ops of one tensor: elementwise, activations, reductions, scans. */
const UNARY = (
  'abs acos acosh asin asinh atan atanh ceil cos cosh elu erf exp expm1 floor isFinite isInf isNaN leakyRelu ' +
  'log log1p logSigmoid logicalNot neg reciprocal relu relu6 round rsqrt selu sigmoid sign sin sinh softplus ' +
  'sqrt square step tan tanh sum prod mean max min all any argMax argMin cumsum cumprod reverse softmax ' +
  'logSoftmax zerosLike onesLike clone transpose'
).split(' ');
/** tfjs's ops of two tensors (their dtypes matched first by the op, as for a user). */
const BINARY = (
  'add sub mul div divNoNan floorDiv mod pow maximum minimum squaredDifference atan2 equal notEqual less ' +
  'lessEqual greater greaterEqual prelu'
).split(' ');

/** An op's result as text (dtype, shape, values to 6 digits: the backends differ in the last ulp), or 'error'. */
async function outcome(backend: 'wasm' | 'cpu', run: () => tf.Tensor): Promise<string> {
  await setBackend(backend);
  try {
    return tf.tidy(() => {
      const y = run();
      const digits = Array.from(y.dataSync() as ArrayLike<number>).map((v) => Number(v.toPrecision(6)));
      return `${y.dtype}[${y.shape}] ${digits}`;
    });
  } catch {
    return 'error';
  }
}

/** The cases where wasm's result differs from cpu's, the reference; cpu's errors are not compared. */
async function differences(cases: [string, () => tf.Tensor][]): Promise<string[]> {
  const differ: string[] = [];
  for (const [name, run] of cases) {
    const [wasm, cpu] = [await outcome('wasm', run), await outcome('cpu', run)];
    if (wasm !== cpu && cpu !== 'error') differ.push(`${name}: wasm ${wasm} | cpu ${cpu}`);
  }
  return differ;
}

// Before wasm-dtypes.ts, 60 of these differed: exp of a bool was 3.6e-41, neg and relu of a bool
// uninitialised bytes, sqrt of an int32 4.5e8, an int32 mod trapped, prelu read an int32 as float bits
describe('tfjs ops on bool and int32 tensors: on wasm what tfjs-cpu, the reference backend, gives', () => {
  it('every op of one tensor', async () => {
    const cases = UNARY.flatMap((op) =>
      (['bool', 'int32'] as const).map((d): [string, () => tf.Tensor] => [`${op}(${d})`, () => ops[op](tensor(d))]),
    );
    expect(await differences(cases)).toEqual([]);
  });

  it('every op of two tensors, in each pair of bool and int32, and against float32', async () => {
    const pairs = [
      ['bool', 'bool'],
      ['bool', 'int32'],
      ['int32', 'bool'],
      ['int32', 'int32'],
      ['bool', 'float32'],
      ['int32', 'float32'],
      ['float32', 'bool'],
      ['float32', 'int32'],
    ] as const;
    const cases = BINARY.flatMap((op) =>
      pairs
        // floorDiv of floats is float on wasm and torch, int32 on cpu (left as it is: RELIABILITY.md)
        .filter(([a, b]) => op !== 'floorDiv' || (a !== 'float32' && b !== 'float32'))
        // bool + bool is torch's logical or on wasm (1), a bool holding 2 on cpu: wasm's is kept
        .filter(([a, b]) => op !== 'add' || a !== 'bool' || b !== 'bool')
        .map(([a, b]): [string, () => tf.Tensor] => [`${op}(${a}, ${b})`, () => ops[op](tensor(a), tensor(b, true))]),
    );
    expect(await differences(cases)).toEqual([]);
  });

  it('the shape and copy ops (a strided slice of an int32 came back as float32 bits)', async () => {
    const reshaping: [string, (x: tf.Tensor) => tf.Tensor][] = [
      ['stridedSlice', (x) => tf.stridedSlice(x, [0, 0], [2, 3], [1, 2])],
      ['split', (x) => tf.split(x, [1, 2], 1)[1]],
      [
        'pad',
        (x) =>
          tf.pad(x, [
            [1, 0],
            [0, 1],
          ]),
      ],
      [
        'mirrorPad',
        (x) =>
          tf.mirrorPad(
            x,
            [
              [1, 0],
              [0, 1],
            ],
            'reflect',
          ),
      ],
      ['slice', (x) => tf.slice(x, [0, 1], [2, 2])],
      ['tile', (x) => tf.tile(x, [2, 1])],
      ['transpose', (x) => tf.transpose(x)],
      ['gather', (x) => tf.gather(x, [1, 0])],
      ['concat', (x) => tf.concat([x, x], 1)],
      ['stack', (x) => tf.stack([x, x])],
      ['topk', (x) => tf.topk(x, 2).values],
      ['broadcastTo', (x) => tf.broadcastTo(x, [2, 2, 3])],
      ['reverse', (x) => tf.reverse(x, 1)],
    ];
    const cases = reshaping.flatMap(([op, f]) =>
      (['bool', 'int32'] as const).map((d): [string, () => tf.Tensor] => [`${op}(${d})`, () => f(tensor(d))]),
    );
    expect(await differences(cases)).toEqual([]);
  });

  it('where over bool and int32 values (wasm aborted its module on bool: the process died)', async () => {
    const condition = () => tf.tensor([1, 0, 0, 1, 1, 0], [2, 3], 'bool');
    const cases = (['bool', 'int32'] as const).map((d): [string, () => tf.Tensor] => [
      `where(bool, ${d}, ${d})`,
      () => tf.where(condition(), tensor(d), tensor(d, true)),
    ]);
    expect(await differences(cases)).toEqual([]);
  });
});

/**
 * PyTorch's default initialisations, as values (Float32Array) drawn from a Generator.
 * Shapes here are PyTorch's: Linear [out, in], Conv2d [out, in, kh, kw].
 */
import { checkNumberOptions, checkOptionNames, checkOptionValue } from '@ddp/tensor';
import { defaultGenerator, type Generator } from './generator.js';

/** torch.nn.init's linear functions: gain 1. */
const LINEAR = [
  'linear',
  'conv1d',
  'conv2d',
  'conv3d',
  'conv_transpose1d',
  'conv_transpose2d',
  'conv_transpose3d',
] as const;
const NONLINEARITIES = [...LINEAR, 'sigmoid', 'tanh', 'relu', 'leaky_relu', 'selu'] as const;
export type Nonlinearity = (typeof NONLINEARITIES)[number];
const FAN_MODES = ['fan_in', 'fan_out'] as const;
export type FanMode = (typeof FAN_MODES)[number];

export class InitError extends Error {
  override name = 'InitError';
}

/** torch.nn.init._calculate_fan_in_and_fan_out. */
export function calculateFanInAndFanOut(shape: readonly number[]): { fanIn: number; fanOut: number } {
  if (shape.length < 2)
    throw new InitError(`fan in and fan out need at least 2 dimensions, got shape [${shape.join(', ')}]`);
  const receptive = shape.slice(2).reduce((a, b) => a * b, 1);
  return { fanIn: shape[1] * receptive, fanOut: shape[0] * receptive };
}

/** torch.nn.init.calculate_gain; a name torch does not know is refused (it gave undefined, then NaN weights). */
export function calculateGain(nonlinearity: Nonlinearity, param?: number): number {
  checkOptionValue('calculateGain', 'nonlinearity', nonlinearity, NONLINEARITIES, (m) => new InitError(m));
  numbers('calculateGain', { param });
  switch (nonlinearity) {
    case 'tanh':
      return 5 / 3;
    case 'relu':
      return Math.SQRT2;
    case 'leaky_relu': {
      const slope = param ?? 0.01;
      return Math.sqrt(2 / (1 + slope * slope));
    }
    case 'selu':
      return 3 / 4;
    default:
      return 1; // LINEAR and sigmoid
  }
}

const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

export interface KaimingOptions {
  a?: number;
  mode?: FanMode;
  nonlinearity?: Nonlinearity;
  generator?: Generator;
}

/** torch.nn.init.kaiming_uniform_: U(-b, b), b = gain·√(3 / fan). */
export function kaimingUniform(shape: readonly number[], options: KaimingOptions = {}): Float32Array {
  const error = (m: string) => new InitError(m);
  checkOptionNames('kaimingUniform', options, ['a', 'mode', 'nonlinearity', 'generator'], error);
  checkOptionValue('kaimingUniform', 'mode', options.mode, FAN_MODES, error);
  checkNumberOptions('kaimingUniform', options, ['a'], error);
  const { fanIn, fanOut } = calculateFanInAndFanOut(shape);
  const fan = (options.mode ?? 'fan_in') === 'fan_in' ? fanIn : fanOut;
  const gain = calculateGain(options.nonlinearity ?? 'leaky_relu', options.a ?? 0);
  const bound = gain * Math.sqrt(3 / fan);
  return (options.generator ?? defaultGenerator).uniform(numel(shape), -bound, bound);
}

/** torch.nn.init.xavier_uniform_: U(-b, b), b = gain·√(6 / (fanIn + fanOut)). */
export function xavierUniform(
  shape: readonly number[],
  gain = 1,
  generator: Generator = defaultGenerator,
): Float32Array {
  numbers('xavierUniform', { gain });
  const { fanIn, fanOut } = calculateFanInAndFanOut(shape);
  const bound = gain * Math.sqrt(6 / (fanIn + fanOut));
  return generator.uniform(numel(shape), -bound, bound);
}

/** The weight init of nn.Linear and nn.Conv2d: kaiming_uniform_(a=√5), i.e. U(±1/√fanIn). */
export function defaultWeightInit(shape: readonly number[], generator: Generator = defaultGenerator): Float32Array {
  return kaimingUniform(shape, { a: Math.sqrt(5), generator });
}

/** The bias init of nn.Linear and nn.Conv2d: U(±1/√fanIn) with the weight's fan in. */
export function defaultBiasInit(size: number, fanIn: number, generator: Generator = defaultGenerator): Float32Array {
  const bound = fanIn > 0 ? 1 / Math.sqrt(fanIn) : 0;
  return generator.uniform(size, -bound, bound);
}

/** torch.nn.init.normal_ (nn.Embedding's default is N(0, 1)). */
export function normalInit(
  shape: readonly number[],
  mean = 0,
  std = 1,
  generator: Generator = defaultGenerator,
): Float32Array {
  numbers('normalInit', { mean, std });
  return generator.normal(numel(shape), mean, std);
}

export function constantInit(shape: readonly number[], value: number): Float32Array {
  numbers('constantInit', { value });
  return new Float32Array(numel(shape)).fill(value);
}

/**
 * Numbers given positionally, as torch's TypeError: normalInit(shape, '1', 0.02) (a config's mean)
 * gave 10.02 and NaN, xavierUniform(shape, { gain: 2 }) NaN everywhere, silently.
 */
function numbers(where: string, values: Record<string, unknown>): void {
  checkNumberOptions(where, values, Object.keys(values), (m) => new InitError(m));
}

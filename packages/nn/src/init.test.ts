import { describe, expect, it } from 'vitest';
import { Generator, GeneratorStateError } from './generator.js';
import {
  calculateFanInAndFanOut,
  calculateGain,
  constantInit,
  defaultBiasInit,
  defaultWeightInit,
  InitError,
  kaimingUniform,
  normalInit,
  xavierUniform,
} from './init.js';

describe('initialisation', () => {
  it('computes fans and gains as PyTorch', () => {
    expect(calculateFanInAndFanOut([8, 5])).toEqual({ fanIn: 5, fanOut: 8 });
    expect(calculateFanInAndFanOut([16, 3, 3, 3])).toEqual({ fanIn: 27, fanOut: 144 });
    expect(() => calculateFanInAndFanOut([4])).toThrow(InitError);
    expect(calculateGain('leaky_relu', Math.sqrt(5))).toBeCloseTo(Math.sqrt(1 / 3), 12);
    expect(calculateGain('tanh')).toBeCloseTo(5 / 3, 12);
  });

  it('draws Linear/Conv weights and biases from U(±1/√fanIn), reproducibly', () => {
    const w = defaultWeightInit([64, 100], new Generator(3));
    const bound = 1 / Math.sqrt(100);
    expect(Math.max(...w)).toBeLessThanOrEqual(bound);
    expect(Math.min(...w)).toBeGreaterThanOrEqual(-bound);
    expect(Math.max(...w)).toBeGreaterThan(0.9 * bound);
    expect(Array.from(defaultWeightInit([64, 100], new Generator(3)))).toEqual(Array.from(w));
    const b = defaultBiasInit(1000, 25, new Generator(1));
    expect(Math.max(...b.map(Math.abs))).toBeLessThanOrEqual(0.2);
    expect(Math.max(...b.map(Math.abs))).toBeGreaterThan(0.18);
    const e = normalInit([100, 50], 0, 1, new Generator(2));
    const std = Math.sqrt(e.reduce((s, x) => s + x * x, 0) / e.length);
    expect(std).toBeGreaterThan(0.95);
    expect(std).toBeLessThan(1.05);
  });

  it("calculateGain knows torch's names and refuses others; kaimingUniform refuses a bad mode or option", () => {
    // before: 'conv2d' and 'selu' gave undefined (NaN weights), a misspelt mode took fan_out, misspelt options dropped
    expect(['conv2d', 'conv_transpose1d', 'linear', 'sigmoid'].map((n) => calculateGain(n as 'linear'))).toEqual([
      1, 1, 1, 1,
    ]);
    expect(calculateGain('selu')).toBe(0.75);
    expect(calculateGain('leaky_relu', 0)).toBeCloseTo(Math.SQRT2, 12);
    expect(() => calculateGain('Relu' as 'relu')).toThrow(/calculateGain: nonlinearity must be one of/);
    expect(() => kaimingUniform([1000, 10], { mode: 'fanout' as 'fan_out' })).toThrow(InitError);
    expect(() => kaimingUniform([1000, 10], { nonLinearity: 'relu' } as never)).toThrow(
      /unknown option "nonLinearity"/,
    );
    expect(Math.max(...kaimingUniform([1000, 10], { mode: 'fan_out', nonlinearity: 'relu' }))).toBeLessThan(0.0775);
  });

  // was silent (probe U): a config's '1' concatenated with each draw (10.02, NaN), an options object as the gain NaN
  it('init functions and Generator draws refuse numbers given as strings or objects, as torch', () => {
    const gen = new Generator(0);
    expect(() => normalInit([6], '1' as never, 0.02, gen)).toThrow(/normalInit: mean must be a number, got "1"/);
    expect(() => xavierUniform([4, 4], { gain: 2 } as never, gen)).toThrow(InitError);
    expect(() => kaimingUniform([4, 4], { a: '2' as never })).toThrow(/kaimingUniform: a must be a number/);
    expect(() => constantInit([2], '0.5' as never)).toThrow(InitError);
    expect(() => calculateGain('leaky_relu', '0.2' as never)).toThrow(InitError);
    expect(() => gen.uniform(4, '1' as never, 2)).toThrow(/Generator.uniform: low must be a number, got "1"/);
    expect(() => gen.normal(4, 0, '1' as never)).toThrow(GeneratorStateError);
    expect(() => gen.uniform(2.5)).toThrow(/n must be a non-negative integer/);
    expect([...normalInit([2], 1, 0, gen)]).toEqual([1, 1]);
  });
});

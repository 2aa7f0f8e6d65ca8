import { describe, expect, it } from 'vitest';
import { Generator } from './generator.js';
import {
  calculateFanInAndFanOut,
  calculateGain,
  defaultBiasInit,
  defaultWeightInit,
  InitError,
  normalInit,
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
});

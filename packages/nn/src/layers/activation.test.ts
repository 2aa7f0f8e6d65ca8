import { tensor } from '@ddp/autograd';
import { describe, expect, it } from 'vitest';
import { ModuleError } from '../module.js';
import { GELU } from './activation.js';

describe('GELU', () => {
  it("takes approximate as torch's string or as an option, and refuses values torch refuses", () => {
    // torch 1.13: F.gelu(-1) = -0.1586553, approximate='tanh' -0.1588080; before, { approximate: 'tanh' } and
    // 'Tanh' silently gave the erf form
    const x = tensor([-1]);
    expect(new GELU().forward(x).item()).toBeCloseTo(-0.1586553, 6);
    expect(new GELU('tanh').forward(x).item()).toBeCloseTo(-0.158808, 6);
    expect(new GELU({ approximate: 'tanh' }).forward(x).item()).toBeCloseTo(-0.158808, 6);
    expect(() => new GELU('Tanh' as 'tanh')).toThrow(/GELU: approximate must be one of 'none', 'tanh', got "Tanh"/);
    expect(() => new GELU({ approximation: 'tanh' } as never)).toThrow(ModuleError);
  });
});

// Test-only: closeness within PyTorch-golden tolerances.
import { expect } from 'vitest';

/** |got − want| ≤ atol + rtol·|want| elementwise, with the worst index in the message. */
export function expectClose(
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  what: string,
  atol = 1e-5,
  rtol = 1e-4,
): void {
  expect(got.length, `${what}: length`).toBe(want.length);
  let worst = -1;
  let excess = 0;
  for (let i = 0; i < want.length; i++) {
    const over = Math.abs(got[i] - want[i]) - (atol + rtol * Math.abs(want[i]));
    if (!(over <= excess)) {
      excess = over;
      worst = i;
    }
  }
  expect(worst, `${what}: [${worst}] got ${got[worst]} want ${want[worst]}`).toBe(-1);
}

/** The largest |got − want|. */
export const maxAbsDiff = (got: ArrayLike<number>, want: ArrayLike<number>): number =>
  Array.from(want).reduce((m, w, i) => Math.max(m, Math.abs(got[i] - w)), 0);

import type { CommArray, Dtype } from '../dtypes.js';
import { firstDiff, show } from './reference.js';

/** Collects failures of a child script's checks and reports them as one RESULT line. */
export class Checker {
  readonly failures: string[] = [];
  checks = 0;

  equal(what: string, d: Dtype, got: CommArray, want: CommArray): void {
    this.checks++;
    const at = firstDiff(got, want);
    if (at >= 0) {
      this.failures.push(
        `${what}: length ${got.length} vs ${want.length}, first difference at ${at}: got ${show(d, got, at)}, want ` +
          `${show(d, want, at)}`,
      );
    }
  }

  ok(what: string, cond: boolean): void {
    this.checks++;
    if (!cond) this.failures.push(what);
  }

  report(extra: Record<string, unknown> = {}): void {
    console.log(`RESULT ${JSON.stringify({ checks: this.checks, failures: this.failures.slice(0, 20), ...extra })}`);
  }
}

// RankLines: what a launcher printed (`[rank N] line`), split back into each rank's lines and RESULTs.
import { Writable } from 'node:stream';

const PREFIXED = /^\[rank (\d+)\] (.*)$/;
const RESULT = /^RESULT (.*)$/;

/**
 * A sink for a launcher's stdout or stderr (launch()'s, or a `ddp-run` child's): keeps the whole
 * text, each rank's lines without the prefix, and each `RESULT <json>` line parsed as it arrives.
 */
export class RankLines<R = unknown> extends Writable {
  /** Everything written, prefixes included. */
  text = '';
  /** By rank: its lines, without the `[rank N] ` prefix. */
  readonly byRank: string[][] = [];
  /** By rank: every `RESULT <json>` line it printed, parsed, in order. */
  readonly results: R[][] = [];
  private partial = '';

  constructor(
    /** Called for each RESULT line as it arrives. */
    private readonly onResult: (rank: number, result: R) => void = () => {},
  ) {
    super();
  }

  override _write(chunk: Buffer | string, _enc: string, done: () => void): void {
    const s = chunk.toString();
    this.text += s;
    const whole = (this.partial + s).split('\n');
    this.partial = whole.pop() ?? '';
    for (const line of whole) {
      const m = PREFIXED.exec(line);
      if (!m) continue;
      const rank = Number(m[1]);
      const text = m[2];
      const lines = this.byRank[rank] ?? [];
      this.byRank[rank] = lines;
      lines.push(text);
      const r = RESULT.exec(text);
      if (!r) continue;
      const result = JSON.parse(r[1]) as R;
      const results = this.results[rank] ?? [];
      this.results[rank] = results;
      results.push(result);
      this.onResult(rank, result);
    }
    done();
  }

  /** The last RESULT of each rank 0…n−1 (undefined where a rank printed none). */
  last(n: number): (R | undefined)[] {
    return Array.from({ length: n }, (_, rank) => this.results[rank]?.at(-1));
  }
}

import type { Readable, Writable } from 'node:stream';

/**
 * Copies a rank's output stream to `sink` a whole line at a time, each line prefixed, so
 * lines of different ranks never interleave; keeps the last lines for the failure summary.
 */
export class PrefixedLines {
  readonly tail: string[] = [];
  private partial = '';

  constructor(
    private readonly prefix: string,
    private readonly sink: Writable,
    private readonly keep = 40,
  ) {}

  attach(source: Readable): void {
    source.setEncoding('utf8');
    source.on('data', (chunk: string) => this.push(chunk));
    source.on('end', () => this.flush());
  }

  push(chunk: string): void {
    const parts = (this.partial + chunk).split('\n');
    this.partial = parts.pop() ?? '';
    if (parts.length === 0) return;
    this.sink.write(parts.map((line) => `${this.prefix}${line}\n`).join(''));
    for (const line of parts) this.remember(line);
  }

  /** Emits a last line that had no newline. */
  flush(): void {
    if (this.partial === '') return;
    const line = this.partial;
    this.partial = '';
    this.sink.write(`${this.prefix}${line}\n`);
    this.remember(line);
  }

  private remember(line: string): void {
    this.tail.push(line.replace(/\r$/, ''));
    if (this.tail.length > this.keep) this.tail.shift();
  }
}

import { existsSync, readFileSync } from 'node:fs';
import { type FileHandle, open, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { makeDirectories } from '@ddp/nn';
import type { Row } from '@ddp/plot';

/** One line of metrics.jsonl: a training step, or an evaluation (with zeroShotTop1). */
export interface MetricRow {
  step: number;
  loss?: number;
  lr?: number;
  samplesPerSec?: number;
  logitScale?: number;
  /** tf.memory().numTensors after the step: must stay flat. */
  numTensors?: number;
  zeroShotTop1?: number;
}

/**
 * metrics.jsonl in the output directory; on resume, rows past the checkpoint's step are dropped.
 * Lines are written in order on one open file without the step waiting for them: rank 0 awaiting
 * each append held every rank up at the next all-reduce. close() waits for them and reports a failed write.
 */
export class MetricsLog {
  readonly path: string;
  private file: FileHandle | null = null;
  private writes: Promise<void> = Promise.resolve();
  private failure: Error | null = null;
  constructor(readonly dir: string) {
    this.path = join(dir, 'metrics.jsonl');
  }

  async open(resumedStep: number | null): Promise<void> {
    await makeDirectories(this.dir);
    const kept = resumedStep === null ? [] : this.rows().filter((r) => r.step <= resumedStep);
    await writeFile(this.path, kept.map((r) => `${JSON.stringify(r)}\n`).join(''));
    this.file = await open(this.path, 'a');
  }

  /** Queues one line after the earlier ones. */
  append(row: MetricRow): void {
    const file = this.file;
    if (!file) throw new Error(`metrics: append to ${this.path} before open() or after close()`);
    const line = `${JSON.stringify(row)}\n`;
    this.writes = this.writes
      .then(() => file.appendFile(line))
      .catch((e: Error) => {
        this.failure ??= e;
      });
  }

  /** Waits for every queued line, closes the file; throws the first write's error, if one failed. */
  async close(): Promise<void> {
    await this.writes;
    await this.file?.close();
    this.file = null;
    if (this.failure) throw this.failure;
  }

  rows(): MetricRow[] {
    if (!existsSync(this.path)) return [];
    return readFileSync(this.path, 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as MetricRow);
  }

  /** curves.png (+ .json, .md): training loss (mean of every `every` steps) and zero-shot top-1 against step. */
  async plot(every = 5): Promise<string[]> {
    const rows = this.rows();
    const points: Row[] = [];
    const losses = rows.filter((r) => r.loss !== undefined);
    for (let i = 0; i < losses.length; i += every) {
      const chunk = losses.slice(i, i + every);
      const value = chunk.reduce((a, r) => a + r.loss!, 0) / chunk.length;
      points.push({ step: chunk.at(-1)!.step, metric: 'train loss', value });
    }
    for (const r of rows) {
      if (r.zeroShotTop1 !== undefined)
        points.push({ step: r.step, metric: 'zero-shot top-1 (%)', value: 100 * r.zeroShotTop1 });
    }
    const title = 'CLIP on two-digit MNIST: train loss and zero-shot top-1 (%)';
    // imported here, not at the top: loading the chart renderer took 0.45–0.8 s of every rank's
    // start-up, and only rank 0 draws, once, at the end
    const { writeReport } = await import('@ddp/plot');
    return writeReport(this.dir, 'curves', points, {
      chart: { x: 'step', y: 'value', series: 'metric', panel: 'metric', title },
    });
  }
}

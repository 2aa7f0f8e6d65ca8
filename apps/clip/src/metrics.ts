import { existsSync, readFileSync } from 'node:fs';
import { type FileHandle, open, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { makeDirectories } from '@ddp/nn';
import type { Row } from '@ddp/plot';
import { ResumeError } from './resume.js';

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
  /** The run that wrote the row (a random id, also in its checkpoints' extra); absent in older files. */
  run?: string;
  /** That run's --checkpoint-dir, resolved. */
  checkpointDir?: string;
}

/** metrics.jsonl could not be written or read (a full disk, a damaged line); names the file. */
export class MetricsError extends Error {
  override name = 'MetricsError';
}

/** Which run a MetricsLog writes for: its id, and its checkpoints' directory. */
export interface RunIdentity {
  run: string;
  checkpointDir: string;
}

/**
 * metrics.jsonl in the output directory; on resume, rows past the checkpoint's step are dropped.
 * Every row names its run, so a file is never cut or continued for another run's (checkRows).
 * Lines are written in order on one open file without the step waiting for them: rank 0 awaiting
 * each append held every rank up at the next all-reduce. A failed write is raised by the next
 * append (training stops there: a full disk lost every row, reported only at the end, untyped) and
 * by close(); nothing is written after it, so no row is glued to a cut one.
 */
export class MetricsLog {
  readonly path: string;
  private file: FileHandle | null = null;
  private writes: Promise<void> = Promise.resolve();
  private failure: Error | null = null;
  private readonly identity: RunIdentity | null;
  /** The id every row carries (null without an identity). */
  get run(): string | null {
    return this.identity?.run ?? null;
  }
  constructor(
    readonly dir: string,
    identity?: RunIdentity,
  ) {
    this.path = join(dir, 'metrics.jsonl');
    this.identity = identity ? { run: identity.run, checkpointDir: resolve(identity.checkpointDir) } : null;
  }

  /**
   * Refuses a file this run must not cut or continue: resumed at `resumed.step`, rows up to it
   * written by another run (its rows and this one's would make one curve, silently); started
   * afresh, rows of a run with another checkpoint directory (`--resume` on a mistyped directory
   * wiped the metrics of the run beside it), unless `overwrite`. Rows of this directory's earlier
   * attempt that never checkpointed are this run's to replace.
   */
  checkRows(resumed: { step: number; run: string | null } | null, overwrite: boolean): void {
    const rows = this.rows();
    if (resumed !== null) {
      // rows written before runs had ids (no `run`) pass: nothing tells whose they are
      const other = rows.find(
        (r) => r.step <= resumed.step && resumed.run !== null && r.run !== undefined && r.run !== resumed.run,
      );
      if (other)
        throw new ResumeError(
          `${this.path} holds step ${other.step} of another run (${other.checkpointDir ?? 'an older version'}), ` +
            `not the one this checkpoint continues: resuming would join the two runs' curves. Pass another --out.`,
        );
    } else if (!overwrite) {
      const other = rows.find((r) => r.checkpointDir !== this.identity?.checkpointDir);
      if (other)
        throw new ResumeError(
          `${this.path} holds the metrics of the run checkpointed in ${other.checkpointDir ?? 'another directory'}, ` +
            'which this new run would replace: pass --overwrite to replace them, or another --out',
        );
    }
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
    if (this.failure) throw this.failure;
    const line = `${JSON.stringify({ ...row, ...this.identity })}\n`;
    this.writes = this.writes
      .then(() => (this.failure ? undefined : file.appendFile(line)))
      .catch((e: Error) => {
        this.failure ??= new MetricsError(`cannot write ${this.path}: ${e.message}`, { cause: e });
      });
  }

  /**
   * Waits for every queued line to be written; throws the first write's error, if one failed. Before
   * a checkpoint commits step k: a resume from it keeps the rows up to k, and a kill right after the
   * commit left the rows still queued missing from the resumed run's file.
   */
  async flush(): Promise<void> {
    await this.writes;
    if (this.failure) throw this.failure;
  }

  /** Waits for every queued line, closes the file; throws the first write's error, if one failed. */
  async close(): Promise<void> {
    await this.writes;
    await this.file?.close();
    this.file = null;
    if (this.failure) throw this.failure;
  }

  /**
   * The file's rows. A last line cut short (no newline: the process died mid-write) is dropped;
   * any other damaged line is a MetricsError naming it (was: a bare SyntaxError).
   */
  rows(): MetricRow[] {
    if (!existsSync(this.path)) return [];
    const text = readFileSync(this.path, 'utf8');
    const lines = text.split('\n');
    return lines.flatMap((line, i) => {
      if (line.trim() === '') return [];
      try {
        return [JSON.parse(line) as MetricRow];
      } catch (e) {
        if (i === lines.length - 1) return []; // cut short: the file does not end with its newline
        throw new MetricsError(`${this.path}:${i + 1} is not a JSON row (${(e as Error).message}); move the file away`);
      }
    });
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

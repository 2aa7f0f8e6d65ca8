import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { MetricsError, MetricsLog } from './metrics.js';

const dir = mkdtempSync(join(tmpdir(), 'clip-metrics-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('MetricsLog', () => {
  it('writes every queued line in order by close(), and refuses lines after it', async () => {
    const log = new MetricsLog(join(dir, 'a'));
    await log.open(null);
    for (let step = 1; step <= 300; step++) log.append({ step, loss: 1 / step });
    await log.close();
    expect(log.rows().map((r) => r.step)).toEqual([...Array(300).keys()].map((i) => i + 1));
    expect(() => log.append({ step: 301 })).toThrow(/after close/);
  });

  it('flush() has every queued line written, the file still open (a checkpoint then commits their step)', async () => {
    const log = new MetricsLog(join(dir, 'e'));
    await log.open(null);
    for (let step = 1; step <= 300; step++) log.append({ step });
    await log.flush();
    expect(log.rows()).toHaveLength(300);
    log.append({ step: 301 });
    await log.close();
    expect(log.rows()).toHaveLength(301);
  });

  it('keeps the rows up to the resumed step and appends after them', async () => {
    const log = new MetricsLog(join(dir, 'b'));
    await log.open(null);
    for (let step = 1; step <= 5; step++) log.append({ step });
    await log.close();
    const resumed = new MetricsLog(join(dir, 'b'));
    await resumed.open(3);
    resumed.append({ step: 4, loss: 0.5 });
    await resumed.close();
    expect(resumed.rows()).toEqual([{ step: 1 }, { step: 2 }, { step: 3 }, { step: 4, loss: 0.5 }]);
  });

  it("refuses to cut or continue another run's rows, and marks each row with its run", async () => {
    const path = join(dir, 'd');
    const first = new MetricsLog(path, { run: 'r1', checkpointDir: join(dir, 'ckpt1') });
    first.checkRows(null, false);
    await first.open(null);
    for (let step = 1; step <= 3; step++) first.append({ step });
    await first.close();
    expect(first.rows()[0]).toEqual({ step: 1, run: 'r1', checkpointDir: join(dir, 'ckpt1') });
    // the same run resumed, and a fresh attempt of its own directory: allowed
    first.checkRows({ step: 2, run: 'r1' }, false);
    new MetricsLog(path, { run: 'r9', checkpointDir: join(dir, 'ckpt1') }).checkRows(null, false);
    // another directory's fresh run: refused unless overwrite
    const second = new MetricsLog(path, { run: 'r2', checkpointDir: join(dir, 'ckpt2') });
    expect(() => second.checkRows(null, false)).toThrow(/holds the metrics of the run checkpointed in .*ckpt1/);
    second.checkRows(null, true);
    // a resume whose checkpoint belongs to another run than the rows up to its step: refused
    expect(() => second.checkRows({ step: 2, run: 'r2' }, false)).toThrow(/holds step 1 of another run \(.*ckpt1\)/);
    // checkpoints and rows written before runs had ids are not checked
    second.checkRows({ step: 2, run: null }, false);
  });

  it('reports a failed write at the next append and at close(), naming the file; writes nothing after it', async () => {
    const log = new MetricsLog(join(dir, 'c'));
    await log.open(null);
    // the file closed under it: the next write fails with EBADF
    await (log as unknown as { file: { close(): Promise<void> } }).file.close();
    log.append({ step: 1 });
    await vi.waitFor(() => expect(() => log.append({ step: 2 })).toThrow(MetricsError));
    // before: training went on to the end, then close() threw a bare ENOSPC naming no file
    expect(() => log.append({ step: 3 })).toThrow(/cannot write .*c\/metrics.jsonl: .*(EBADF|closed)/);
    await expect(log.close()).rejects.toThrow(MetricsError);
  });

  it('drops a last line cut short, and names a damaged line elsewhere (was: a bare SyntaxError)', () => {
    mkdirSync(join(dir, 'cut'));
    const path = join(dir, 'cut', 'metrics.jsonl');
    writeFileSync(path, '{"step":1}\n{"step":2}\n{"step":3,"lo');
    expect(new MetricsLog(join(dir, 'cut')).rows().map((r) => r.step)).toEqual([1, 2]);
    writeFileSync(path, '{"step":1}\n{"step":2,"samplesPe{"step":3}\n{"step":4}\n');
    expect(() => new MetricsLog(join(dir, 'cut')).rows()).toThrow(/cut\/metrics.jsonl:2 is not a JSON row/);
  });
});

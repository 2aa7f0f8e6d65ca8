import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';

const PYTHON = '/usr/bin/python3';

/**
 * A long-lived PyTorch process answering one JSON line per JSON line it is sent (the
 * benchmark's Python twin), so that each case runs in ddp and in PyTorch back to back and the
 * machine's drifting load hits both alike. null where /usr/bin/python3 does not import torch.
 */
export class TorchPeer {
  private readonly lines: AsyncIterator<string>;
  private stderr = '';

  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    readonly version: string,
  ) {
    this.lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    child.stderr.on('data', (c: Buffer) => {
      this.stderr = (this.stderr + c.toString()).slice(-2000);
    });
  }

  static start(script: string): TorchPeer | null {
    const probe = spawnSync(PYTHON, ['-c', 'import torch; print(torch.__version__)'], { encoding: 'utf8' });
    if (probe.status !== 0) return null;
    return new TorchPeer(spawn(PYTHON, [script]), probe.stdout.trim());
  }

  /** Sends one case; resolves with the peer's answer. */
  async ask<T>(request: object): Promise<T> {
    this.child.stdin.write(`${JSON.stringify(request)}\n`);
    const { value, done } = await this.lines.next();
    if (done) throw new Error(`the PyTorch peer ended: ${this.stderr}`);
    return JSON.parse(value) as T;
  }

  close(): void {
    this.child.stdin.end();
  }
}

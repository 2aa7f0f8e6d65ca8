import { isGradEnabled } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import type { Module } from '@ddp/nn';
import { broadcastTensors, buffersOf } from './sync.js';

/**
 * Rank 0's buffers (BatchNorm's running statistics) broadcast to every rank. torch broadcasts
 * them before a forward that follows a synchronized training forward; ddp's forward cannot wait
 * for a collective, so they go out at the end of each synchronized backward (the same values:
 * nothing changes buffers between a backward and the next forward). A training forward whose
 * backward never ran leaves them apart: the next forward warns once, and `sync` mends it.
 */
export class BufferSync {
  /** A synchronized training forward ran since the last broadcast (torch's require_forward_param_sync). */
  private pending = false;
  private warned = false;

  /** Whether the module had buffers to broadcast when wrapped (torch's modules_buffers): forwards skip the walk. */
  private readonly watched: boolean;

  constructor(
    private readonly module: Module,
    private readonly group: ProcessGroup,
    private readonly enabled: boolean,
  ) {
    this.watched = this.buffers.length > 0;
  }

  private get buffers() {
    return this.enabled && this.group.size > 1 ? buffersOf(this.module) : [];
  }

  /** Called by every forward; `synchronized` is false under noSync. */
  beforeForward(synchronized: boolean, rank: number): void {
    if (!this.watched) return;
    if (this.pending && !this.warned) {
      this.warned = true;
      process.emitWarning(
        `DistributedDataParallel (rank ${rank}): this forward follows a training forward whose backward never ` +
          "ran, so it uses this rank's own buffers (torch would broadcast rank 0's first); await " +
          'ddp.syncBuffers() before it',
        { code: 'DDP_BUFFERS_UNSYNCED' },
      );
    }
    if (isGradEnabled() && synchronized && this.module.training) this.pending = true;
  }

  /** Broadcasts `from`'s buffers (a collective of the group). */
  async sync(from: number): Promise<void> {
    const buffers = this.buffers;
    if (buffers.length > 0) await broadcastTensors(buffers, this.group, from);
    this.pending = false;
  }
}

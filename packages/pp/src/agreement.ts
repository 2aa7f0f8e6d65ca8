import type { ProcessGroup } from '@ddp/comm';
import type { Action, Schedule } from './schedule.js';
import { type PipelineStage, PipelineStageError } from './stage.js';

/** Dims of an activation shape the agreement sends as they are; the rest are folded into the last one sent. */
const SHAPE_DIMS = 6;

/** `shape` as SHAPE_DIMS + 1 numbers: its rank, then its dims (any beyond SHAPE_DIMS − 1 multiplied into the last). */
function shapeKey(shape: readonly number[]): number[] {
  const dims = shape.slice(0, SHAPE_DIMS - 1);
  if (shape.length >= SHAPE_DIMS) dims.push(shape.slice(SHAPE_DIMS - 1).reduce((a, b) => a * b, 1));
  return [shape.length, ...dims, ...Array<number>(SHAPE_DIMS - dims.length).fill(0)];
}

/**
 * Every stage must pass the same number of micro-batches with the same activation shape. Under
 * 1F1B a stage given one more read the next step's first activation as its last micro-batch and
 * weighted its losses by 1/4 instead of 1/3, and both steps ended without an error; a stage given
 * [seq, batch, dim] where the next had [batch, seq, dim] read another layout of the same values.
 */
export async function agreeOnMicroBatches(stage: PipelineStage, ppGroup: ProcessGroup, m: number, shape: number[]) {
  const mine = Int32Array.from([m, ...shapeKey(shape)]);
  const all = await ppGroup.allGather(mine).wait();
  if (all.every((a) => a.every((v, i) => v === mine[i]))) return;
  const each = all
    .map((a, s) => `stage ${s}: ${a[0]} of [${[...a.subarray(2, 2 + Math.min(a[1], SHAPE_DIMS))].join(', ')}]`)
    .join(', ');
  throw new PipelineStageError(
    `stage ${stage.stage}: pipelineStep: the stages pass different micro-batch counts or activation shapes (${each})`,
  );
}

/** An action as numbers: forward [0, mb], backward [1, mb], comm [2, n, then kind, channel, mb, peer per transfer]. */
function encodeSchedule(schedule: Schedule): number[] {
  return schedule.flatMap((a) =>
    a.op === 'comm'
      ? [
          2,
          a.transfers.length,
          ...a.transfers.flatMap((t) => [+(t.kind === 'recv'), +(t.channel === 'gradient'), t.microBatch, t.peer]),
        ]
      : [a.op === 'forward' ? 0 : 1, a.microBatch],
  );
}

function decodeSchedule(code: Int32Array, length: number): Schedule {
  const schedule: Schedule = [];
  for (let i = 0; i < length; ) {
    const op = code[i++];
    if (op !== 2) {
      schedule.push({ op: op === 0 ? 'forward' : 'backward', microBatch: code[i++] } as Action);
      continue;
    }
    const n = code[i++];
    const transfers = [...Array(n).keys()].map((j) => {
      const [kind, channel, microBatch, peer] = code.subarray(i + 4 * j, i + 4 * j + 4);
      return { kind: kind ? 'recv' : 'send', channel: channel ? 'gradient' : 'activation', microBatch, peer } as const;
    });
    i += 4 * n;
    schedule.push({ op: 'comm', transfers });
  }
  return schedule;
}

/**
 * Every stage's explicit schedule (two all-gathers: the lengths, then the padded encodings), so
 * that each stage can check them all together: a hand-written schedule that skipped a backward
 * dropped that micro-batch's gradient without an error.
 */
export async function gatherSchedules(schedule: Schedule, ppGroup: ProcessGroup): Promise<Schedule[]> {
  const mine = encodeSchedule(schedule);
  const lengths = await ppGroup.allGather(Int32Array.of(mine.length)).wait();
  const longest = Math.max(...lengths.map((l) => l[0]));
  const padded = new Int32Array(longest);
  padded.set(mine);
  const all = await ppGroup.allGather(padded).wait();
  return all.map((code, s) => decodeSchedule(code as Int32Array, lengths[s][0]));
}

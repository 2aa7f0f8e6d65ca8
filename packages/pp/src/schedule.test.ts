import { describe, expect, it } from 'vitest';
import { checkSchedule, ScheduleError } from './check.js';
import {
  type Action,
  afabSchedule,
  idealBubbleFraction,
  oneFOneBSchedule,
  peakInFlight,
  pipelineSchedules,
  type Schedule,
  type ScheduleName,
} from './schedule.js';
import { distributeLayers } from './stage.js';

const NAMES: ScheduleName[] = ['afab', '1f1b'];

function expectScheduleError(fn: () => void, kind: string, stages: number[], text: RegExp): void {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ScheduleError);
    const err = e as ScheduleError;
    expect(err.kind).toBe(kind);
    expect(err.stages).toEqual(stages);
    expect(err.message).toMatch(text);
    return;
  }
  throw new Error('the schedule was accepted');
}

/** Every batched comm action split into one action per transfer, sends first: the naive order. */
function unbatched(s: Schedule): Schedule {
  return s.flatMap((a): Action[] => {
    if (a.op !== 'comm') return [a];
    const ordered = [...a.transfers].sort((x, y) => (x.kind === y.kind ? 0 : x.kind === 'send' ? -1 : 1));
    return ordered.map((t) => ({ op: 'comm' as const, transfers: [t] }));
  });
}

describe('distributeLayers', () => {
  it('splits as evenly as possible, earlier stages taking the remainder', () => {
    expect([0, 1].map((s) => distributeLayers(5, 2, s))).toEqual([
      [0, 3],
      [3, 5],
    ]);
    expect([0, 1, 2].map((s) => distributeLayers(4, 3, s))).toEqual([
      [0, 2],
      [2, 3],
      [3, 4],
    ]);
    expect(distributeLayers(4, 1, 0)).toEqual([0, 4]);
  });
  it('rejects more stages than layers and stages out of range', () => {
    expect(() => distributeLayers(1, 2, 0)).toThrow(/1 layers cannot fill 2 stages/);
    expect(() => distributeLayers(4, 2, 2)).toThrow(/stage 2 of 2/);
  });
});

describe('schedules', () => {
  it('AFAB and 1F1B pass the checker for 1–4 stages and 1–8 micro-batches', () => {
    for (const name of NAMES) {
      for (const p of [1, 2, 3, 4])
        for (const m of [1, 2, 3, 4, 8]) expect(() => checkSchedule(pipelineSchedules(name, p, m), m)).not.toThrow();
    }
  });

  it('1F1B runs p − stage − 1 warm-up forwards and holds at most p − stage micro-batches; AFAB holds all m', () => {
    const p = 4;
    const m = 8;
    for (let stage = 0; stage < p; stage++) {
      const s = oneFOneBSchedule(stage, p, m);
      const firstBackward = s.findIndex((a) => a.op === 'backward');
      const forwardsBefore = s.slice(0, firstBackward).filter((a) => a.op === 'forward').length;
      expect(forwardsBefore).toBe(p - stage); // warm-up forwards plus the first steady-state forward
      expect(peakInFlight(s)).toBe(p - stage);
      expect(peakInFlight(afabSchedule(stage, p, m))).toBe(m);
    }
  });

  it('the ideal bubble is (p − 1) / (m + p − 1)', () => {
    expect(idealBubbleFraction(1, 4)).toBe(0);
    expect(idealBubbleFraction(2, 1)).toBe(0.5);
    expect(idealBubbleFraction(4, 8)).toBeCloseTo(3 / 11, 12);
  });

  it('the last stage alternates strictly under 1F1B', () => {
    const ops = oneFOneBSchedule(1, 2, 3)
      .filter((a) => a.op !== 'comm')
      .map((a) => `${a.op[0]}${'microBatch' in a ? a.microBatch : ''}`);
    expect(ops).toEqual(['f0', 'b0', 'f1', 'b1', 'f2', 'b2']);
  });

  it('pairs the steady-state sends with the opposite receives in one batch', () => {
    const s = oneFOneBSchedule(0, 2, 4);
    const batched = s.filter((a) => a.op === 'comm' && a.transfers.length === 2);
    expect(batched.length).toBeGreaterThan(0);
  });
});

describe('checkSchedule rejects broken schedules', () => {
  it('1F1B with unbatched send-then-receive deadlocks (both stages wait in a send)', () => {
    const broken = pipelineSchedules('1f1b', 2, 4).map(unbatched);
    expectScheduleError(
      () => checkSchedule(broken, 4),
      'deadlock',
      [0, 1],
      new RegExp(
        [
          String.raw`stage 0 waits in action \d+ \(send activation 1 to stage 1\)`,
          String.raw`stage 1 waits in action \d+ \(send gradient 0 to stage 0\)`,
        ].join('.*'),
      ),
    );
    expectScheduleError(
      () => checkSchedule(pipelineSchedules('1f1b', 4, 8).map(unbatched), 8),
      'deadlock',
      [0, 1, 2, 3],
      /waits/,
    );
  });

  it('the last stage backwarding in reverse order sends gradients the previous stage does not expect', () => {
    const schedules = pipelineSchedules('afab', 2, 4);
    const last = schedules[1];
    const fwd = last.slice(0, 8);
    const bwd = [3, 2, 1, 0].flatMap((mb) => [
      { op: 'backward' as const, microBatch: mb },
      {
        op: 'comm' as const,
        transfers: [{ kind: 'send' as const, channel: 'gradient' as const, microBatch: mb, peer: 0 }],
      },
    ]);
    schedules[1] = [...fwd, ...bwd];
    expectScheduleError(
      () => checkSchedule(schedules, 4),
      'mismatch',
      [1, 0],
      /stage 1 sends the gradient of micro-batch 3 while stage 0 receives that of micro-batch 0/,
    );
  });

  it('a receive with no send: the waiting stage is named and the peer is finished', () => {
    const schedules = pipelineSchedules('afab', 2, 4);
    schedules[1] = schedules[1].slice(0, -1); // drop the last gradient send
    expectScheduleError(
      () => checkSchedule(schedules, 4),
      'deadlock',
      [0],
      /stage 0 waits .*recv gradient 3 from stage 1.*finished: stage 1/,
    );
  });

  it('a send with no receive deadlocks', () => {
    const schedules = pipelineSchedules('afab', 2, 2);
    schedules[0].push({ op: 'comm', transfers: [{ kind: 'send', channel: 'activation', microBatch: 1, peer: 1 }] });
    expectScheduleError(() => checkSchedule(schedules, 2), 'deadlock', [0], /send activation 1 to stage 1/);
  });

  it('a forward before its activation arrives, or a send before its forward, is a dependency error', () => {
    const schedules = pipelineSchedules('afab', 2, 2);
    schedules[1] = [{ op: 'forward', microBatch: 0 }, ...schedules[1]];
    expectScheduleError(
      () => checkSchedule(schedules, 2),
      'dependency',
      [1],
      /forward\(0\).*input activation was not received/,
    );
    const early: Schedule[] = pipelineSchedules('afab', 2, 2);
    early[0] = [
      { op: 'comm', transfers: [{ kind: 'send', channel: 'activation', microBatch: 0, peer: 1 }] },
      ...early[0],
    ];
    expectScheduleError(() => checkSchedule(early, 2), 'dependency', [0], /micro-batch 0 has no activation yet/);
  });

  it('a transfer to the wrong neighbour, a skipped micro-batch, or a repeated forward is invalid', () => {
    const wrong = pipelineSchedules('afab', 3, 1);
    wrong[0] = wrong[0].map((a) =>
      a.op === 'comm' ? { op: 'comm', transfers: a.transfers.map((t) => ({ ...t, peer: 2 })) } : a,
    );
    expectScheduleError(() => checkSchedule(wrong, 1), 'invalid', [0], /goes to stage 1, not 2/);
    expectScheduleError(
      () => checkSchedule(pipelineSchedules('1f1b', 2, 2), 3),
      'incomplete',
      [0],
      /never forwards micro-batch 2/,
    );
    const twice = pipelineSchedules('afab', 1, 1);
    twice[0].splice(1, 0, { op: 'forward', microBatch: 0 });
    expectScheduleError(() => checkSchedule(twice, 1), 'invalid', [0], /already forwarded/);
  });
});

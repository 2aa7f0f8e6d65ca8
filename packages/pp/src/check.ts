import { type Action, describeAction, type Schedule, type Transfer } from './schedule.js';

export type ScheduleErrorKind = 'invalid' | 'dependency' | 'mismatch' | 'deadlock' | 'incomplete';

/** A pipeline schedule that would compute the wrong thing, pair the wrong transfers, or hang. */
export class ScheduleError extends Error {
  override readonly name = 'ScheduleError';
  constructor(
    readonly kind: ScheduleErrorKind,
    /** The pipeline stages the problem is about. */
    readonly stages: number[],
    message: string,
  ) {
    super(`pipeline schedule ${kind}: ${message}`);
  }
}

/** What one stage has done so far in the simulation. */
class StageState {
  pc = 0;
  /** Transfers of the current comm action already paired with the peer's. */
  matched = new Set<Transfer>();
  readonly forwarded = new Set<number>();
  readonly backwarded = new Set<number>();
  readonly received = { activation: new Set<number>(), gradient: new Set<number>() };
  constructor(
    readonly stage: number,
    readonly schedule: Schedule,
  ) {}
  get current(): Action | undefined {
    return this.schedule[this.pc];
  }
}

function expectedPeer(t: Transfer, stage: number): number {
  const towardNext = (t.channel === 'activation') === (t.kind === 'send');
  return towardNext ? stage + 1 : stage - 1;
}

/**
 * Simulates the schedules of all stages together, transfers being rendezvous (a send completes
 * only when its receive is posted, the strictest semantics a transport may have), and throws a
 * `ScheduleError` unless: every transfer goes to the adjacent stage of its channel, every send
 * meets a receive of the same micro-batch, forwards and backwards have their inputs (received
 * activation, own forward, received gradient) when they run, every stage forwards and
 * backwards each micro-batch exactly once, and no set of stages ends up waiting on each other.
 */
export function checkSchedule(schedules: Schedule[], numMicroBatches: number): void {
  const p = schedules.length;
  const states = schedules.map((s, stage) => new StageState(stage, s));
  const fail = (kind: ScheduleErrorKind, stages: number[], msg: string): never => {
    throw new ScheduleError(kind, stages, msg);
  };

  /** Checks what an action needs from before it; called once, when a stage reaches it. */
  const enter = (st: StageState): void => {
    const a = st.current;
    if (!a) return;
    const at = `stage ${st.stage}, action ${st.pc} (${describeAction(a)})`;
    if (a.op === 'forward' || a.op === 'backward') {
      const mb = a.microBatch;
      if (!Number.isInteger(mb) || mb < 0 || mb >= numMicroBatches)
        fail('invalid', [st.stage], `${at}: micro-batch ${mb} is not in [0, ${numMicroBatches})`);
      if (a.op === 'forward') {
        if (st.forwarded.has(mb)) fail('invalid', [st.stage], `${at}: micro-batch ${mb} was already forwarded`);
        if (st.stage > 0 && !st.received.activation.has(mb))
          fail('dependency', [st.stage], `${at}: its input activation was not received`);
      } else {
        if (!st.forwarded.has(mb)) fail('dependency', [st.stage], `${at}: micro-batch ${mb} was not forwarded`);
        if (st.backwarded.has(mb)) fail('invalid', [st.stage], `${at}: micro-batch ${mb} was already backwarded`);
        if (st.stage < p - 1 && !st.received.gradient.has(mb))
          fail('dependency', [st.stage], `${at}: its output gradient was not received`);
      }
      return;
    }
    const seen = new Set<string>();
    for (const t of a.transfers) {
      if (t.peer !== expectedPeer(t, st.stage))
        fail(
          'invalid',
          [st.stage],
          `${at}: ${t.channel} ${t.kind} goes to stage ${expectedPeer(t, st.stage)}, not ${t.peer}`,
        );
      if (t.peer < 0 || t.peer >= p) fail('invalid', [st.stage], `${at}: there is no stage ${t.peer}`);
      const key = `${t.kind}/${t.channel}/${t.peer}`;
      if (seen.has(key))
        fail(
          'invalid',
          [st.stage],
          `${at}: two ${t.channel} ${t.kind}s with stage ${t.peer} in one batch have no defined order`,
        );
      seen.add(key);
      if (t.kind === 'send') {
        const done = t.channel === 'activation' ? st.forwarded : st.backwarded;
        if (!done.has(t.microBatch))
          fail('dependency', [st.stage], `${at}: micro-batch ${t.microBatch} has no ${t.channel} yet`);
      } else if (st.received[t.channel].has(t.microBatch)) {
        fail('invalid', [st.stage], `${at}: ${t.channel} of micro-batch ${t.microBatch} was already received`);
      }
    }
  };

  /** Runs one step of a stage if it can; returns whether anything happened. */
  const step = (st: StageState): boolean => {
    const a = st.current;
    if (!a) return false;
    let progressed = false;
    if (a.op === 'forward') st.forwarded.add(a.microBatch);
    else if (a.op === 'backward') st.backwarded.add(a.microBatch);
    else {
      for (const t of a.transfers) {
        if (st.matched.has(t)) continue;
        const peer = states[t.peer];
        const other = peer.current;
        if (other?.op !== 'comm') continue;
        const partner = other.transfers.find(
          (u) => !peer.matched.has(u) && u.kind !== t.kind && u.channel === t.channel && u.peer === st.stage,
        );
        if (!partner) continue;
        if (partner.microBatch !== t.microBatch) {
          const [send, recv, from, to] =
            t.kind === 'send' ? [t, partner, st.stage, peer.stage] : [partner, t, peer.stage, st.stage];
          fail(
            'mismatch',
            [from, to],
            `stage ${from} sends the ${t.channel} of micro-batch ${send.microBatch} while stage ${to} ` +
              `receives that of micro-batch ${recv.microBatch}`,
          );
        }
        st.matched.add(t);
        peer.matched.add(partner);
        progressed = true;
      }
      if (st.matched.size < a.transfers.length) return progressed;
      for (const t of a.transfers) if (t.kind === 'recv') st.received[t.channel].add(t.microBatch);
      st.matched = new Set();
    }
    st.pc++;
    enter(st);
    return true;
  };

  states.forEach(enter);
  for (;;) {
    let progressed = false;
    for (const st of states) while (step(st)) progressed = true;
    if (states.every((st) => !st.current)) break;
    if (!progressed) {
      const blocked = states.filter((st) => st.current);
      const lines = blocked.map((st) => `stage ${st.stage} waits in action ${st.pc} (${describeAction(st.current!)})`);
      const finished = states.filter((st) => !st.current).map((st) => st.stage);
      if (finished.length) lines.push(`finished: stage ${finished.join(', ')}`);
      fail(
        'deadlock',
        blocked.map((st) => st.stage),
        lines.join('; '),
      );
    }
  }
  for (const st of states) {
    for (let mb = 0; mb < numMicroBatches; mb++) {
      if (!st.forwarded.has(mb) || !st.backwarded.has(mb)) {
        fail(
          'incomplete',
          [st.stage],
          `stage ${st.stage} never ${st.forwarded.has(mb) ? 'backwards' : 'forwards'} micro-batch ${mb}`,
        );
      }
    }
  }
}

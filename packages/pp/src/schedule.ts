/**
 * Pipeline schedules as data: one list of actions per pipeline stage. The same list is
 * checked by `checkSchedule` (simulated on every stage) and then executed by `runSchedule`,
 * so what runs is exactly what was checked.
 */

/** Activations travel forward (stage r → r + 1), their gradients backward (r + 1 → r). */
export type Channel = 'activation' | 'gradient';

/** One point-to-point transfer of one micro-batch's tensor; `peer` is a pipeline (pp-group) rank. */
export interface Transfer {
  kind: 'send' | 'recv';
  channel: Channel;
  microBatch: number;
  peer: number;
}

export type Action =
  | { op: 'forward'; microBatch: number }
  | { op: 'backward'; microBatch: number }
  /** Transfers started together that complete together (batchIsendIrecv). */
  | { op: 'comm'; transfers: Transfer[] };

export type Schedule = Action[];

export type ScheduleName = 'afab' | '1f1b';

/** Builds the actions of one stage that move micro-batch data across its boundaries. */
class StageActions {
  readonly actions: Schedule = [];
  constructor(
    readonly stage: number,
    readonly numStages: number,
  ) {}
  private get first(): boolean {
    return this.stage === 0;
  }
  private get last(): boolean {
    return this.stage === this.numStages - 1;
  }
  /** The transfers of one boundary operation, empty where the stage has no such neighbour. */
  recvForward(mb: number): Transfer[] {
    return this.first ? [] : [{ kind: 'recv', channel: 'activation', microBatch: mb, peer: this.stage - 1 }];
  }
  sendForward(mb: number): Transfer[] {
    return this.last ? [] : [{ kind: 'send', channel: 'activation', microBatch: mb, peer: this.stage + 1 }];
  }
  recvBackward(mb: number): Transfer[] {
    return this.last ? [] : [{ kind: 'recv', channel: 'gradient', microBatch: mb, peer: this.stage + 1 }];
  }
  sendBackward(mb: number): Transfer[] {
    return this.first ? [] : [{ kind: 'send', channel: 'gradient', microBatch: mb, peer: this.stage - 1 }];
  }
  /** Appends one comm action holding all the given transfers (nothing when there are none). */
  comm(...groups: Transfer[][]): this {
    const transfers = groups.flat();
    if (transfers.length > 0) this.actions.push({ op: 'comm', transfers });
    return this;
  }
  forward(mb: number): this {
    this.actions.push({ op: 'forward', microBatch: mb });
    return this;
  }
  backward(mb: number): this {
    this.actions.push({ op: 'backward', microBatch: mb });
    return this;
  }
}

function checkArgs(stage: number, numStages: number, numMicroBatches: number): void {
  if (!Number.isInteger(numStages) || numStages < 1)
    throw new RangeError(`pipeline schedule: numStages ${numStages} must be a positive integer`);
  if (!Number.isInteger(stage) || stage < 0 || stage >= numStages)
    throw new RangeError(`pipeline schedule: stage ${stage} is not in [0, ${numStages})`);
  if (!Number.isInteger(numMicroBatches) || numMicroBatches < 1)
    throw new RangeError(`pipeline schedule: numMicroBatches ${numMicroBatches} must be a positive integer`);
}

/** All forward, then all backward (GPipe): every stage holds all m micro-batches' activations at the turn. */
export function afabSchedule(stage: number, numStages: number, numMicroBatches: number): Schedule {
  checkArgs(stage, numStages, numMicroBatches);
  const s = new StageActions(stage, numStages);
  for (let mb = 0; mb < numMicroBatches; mb++) s.comm(s.recvForward(mb)).forward(mb).comm(s.sendForward(mb));
  for (let mb = 0; mb < numMicroBatches; mb++) s.comm(s.recvBackward(mb)).backward(mb).comm(s.sendBackward(mb));
  return s.actions;
}

/**
 * One forward, one backward (PipeDream-flush / Megatron): p − stage − 1 warm-up forwards, then
 * alternate a forward and a backward, then the cool-down backwards. A stage holds at most
 * p − stage micro-batches' activations. In the steady state the send of one direction is
 * paired with the receive of the other in one batch, as with Megatron's
 * send_forward_recv_backward, so no two stages wait on each other's send.
 */
export function oneFOneBSchedule(stage: number, numStages: number, numMicroBatches: number): Schedule {
  checkArgs(stage, numStages, numMicroBatches);
  const s = new StageActions(stage, numStages);
  const warmup = Math.min(numStages - stage - 1, numMicroBatches);
  const steady = numMicroBatches - warmup;
  for (let mb = 0; mb < warmup; mb++) s.comm(s.recvForward(mb)).forward(mb).comm(s.sendForward(mb));
  if (steady > 0) s.comm(s.recvForward(warmup));
  for (let i = 0; i < steady; i++) {
    const fwd = warmup + i;
    s.forward(fwd).comm(s.sendForward(fwd), s.recvBackward(i)).backward(i);
    if (i === steady - 1) s.comm(s.sendBackward(i));
    else s.comm(s.sendBackward(i), s.recvForward(fwd + 1));
  }
  for (let mb = steady; mb < numMicroBatches; mb++) s.comm(s.recvBackward(mb)).backward(mb).comm(s.sendBackward(mb));
  return s.actions;
}

/** The schedule of one stage by name. */
export function makeSchedule(name: ScheduleName, stage: number, numStages: number, numMicroBatches: number): Schedule {
  return name === 'afab'
    ? afabSchedule(stage, numStages, numMicroBatches)
    : oneFOneBSchedule(stage, numStages, numMicroBatches);
}

/** The schedules of every stage of a pipeline. */
export function pipelineSchedules(name: ScheduleName, numStages: number, numMicroBatches: number): Schedule[] {
  return [...Array(numStages).keys()].map((stage) => makeSchedule(name, stage, numStages, numMicroBatches));
}

/** The most micro-batches whose forward has run and whose backward has not, at any point of a schedule. */
export function peakInFlight(schedule: Schedule): number {
  let live = 0;
  let peak = 0;
  for (const a of schedule) {
    if (a.op === 'forward') peak = Math.max(peak, ++live);
    else if (a.op === 'backward') live--;
  }
  return peak;
}

/** The idle fraction of an ideal pipeline of p equal stages over m micro-batches: (p − 1) / (m + p − 1). */
export function idealBubbleFraction(numStages: number, numMicroBatches: number): number {
  return (numStages - 1) / (numMicroBatches + numStages - 1);
}

/** A readable one-line form of an action, for errors and logs. */
export function describeAction(a: Action): string {
  if (a.op !== 'comm') return `${a.op}(${a.microBatch})`;
  return a.transfers
    .map((t) => `${t.kind} ${t.channel} ${t.microBatch} ${t.kind === 'send' ? 'to' : 'from'} stage ${t.peer}`)
    .join(' + ');
}

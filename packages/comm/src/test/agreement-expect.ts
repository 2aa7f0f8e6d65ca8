import type { RankOutcome } from '@ddp/launch/testing';
import { BAD_CALLS, MISMATCHES } from './mismatches.js';

/** What agreement.child.ts and average.child.ts must report on every rank, whatever the backend. */

interface Outcome {
  phase: string;
  name: string;
  message?: string;
  ranks?: number[];
  cause?: { name: string; message: string };
}
/** Rank o's report of a phase. */
export const phase = (o: RankOutcome, p: string) => (o.results as Outcome[]).find((r) => r.phase === p);

/** agreement.child.ts run with every MISMATCHES and BAD_CALLS case: the outcomes that are wrong. */
export function wrongAgreement(out: RankOutcome[]): string[] {
  const wrong: string[] = [];
  const want = (o: RankOutcome, p: string, name: string, ok: (r: Outcome) => boolean = () => true) => {
    const r = phase(o, p);
    if (r?.name !== name || !ok(r)) wrong.push(`rank ${o.rank}, ${p}: ${r?.name}: ${r?.message ?? ''}`.slice(0, 300));
  };
  for (const o of out) {
    for (const name of Object.keys(MISMATCHES)) {
      want(o, name, 'CollectiveMismatchError');
      const namesFirst = (r: Outcome) =>
        r.message?.includes('refused') === true && r.cause?.name === 'CollectiveMismatchError';
      want(o, `${name}/after`, 'CollectiveMismatchError', namesFirst);
    }
    // rank 1's bad call aborted the group: its peers do not run their collective without it
    for (const name of Object.keys(BAD_CALLS)) {
      if (o.rank === 1) want(o, name, 'InvalidArgumentError');
      // (refused at once when rank 1's abort arrived before this rank made the call)
      else
        want(
          o,
          name,
          'GroupAbortedError',
          (r) => r.ranks?.join() === '1' && /InvalidArgumentError/.test(r.message ?? ''),
        );
      want(o, `${name}/after`, 'GroupAbortedError', (r) => /refused.*InvalidArgumentError/.test(r.message ?? ''));
    }
    // the world group was never involved
    want(o, 'world', 'ok');
  }
  return wrong;
}

interface Average {
  phase: string;
  finite: boolean;
  maxRel: number;
  ordinaryExact: boolean;
  hash: string;
}

/** average.child.ts: the cases that are wrong (not finite, too far, ordinary ones not exact, ranks differ). */
export function wrongAverages(out: RankOutcome[]): string[] {
  // bfloat16 first: its name contains 'float16'
  const tolerance = (phase: string) => (phase.includes('bfloat16') ? 1e-2 : phase.includes('float16') ? 2e-3 : 1e-6);
  const wrong: string[] = [];
  const first = (out[0]?.results ?? []) as Average[];
  if (first.length < 10) wrong.push(`rank 0 reported ${first.length} cases`);
  for (const o of out) {
    for (const r of o.results as Average[]) {
      const ok = r.finite && r.maxRel <= tolerance(r.phase) && r.ordinaryExact;
      if (!ok) wrong.push(`rank ${o.rank} ${r.phase}: ${JSON.stringify(r)}`);
      const peer = first.find((p) => p.phase === r.phase);
      // reduceScatter leaves each rank its own chunk: nothing to compare
      const differs = peer && !r.phase.startsWith('reduceScatter') && peer.hash !== r.hash;
      if (differs) wrong.push(`rank ${o.rank} ${r.phase}: differs from rank 0`);
    }
  }
  return wrong;
}

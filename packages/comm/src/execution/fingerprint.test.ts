import { expect, it } from 'vitest';
import { describe as describeCall, fingerprintOf } from './fingerprint.js';

it('names a point-to-point transfer for both of its ends (a recv was reported as send(…))', () => {
  const fp = fingerprintOf({ op: 'send', dtype: 'float32', reduceOp: 'sum', count: 3, seq: 1, root: 0 });
  expect(describeCall(fp)).toBe('send/recv(float32, count 3, tag 0, seq 1)');
  const sum = fingerprintOf({ op: 'allReduce', dtype: 'float32', reduceOp: 'avg', count: 4, seq: 2, root: 0 });
  expect(describeCall(sum)).toBe('allReduce(float32, count 4, avg, seq 2)');
});

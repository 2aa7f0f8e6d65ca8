import { expect, it } from 'vitest';
import { InvalidArgumentError } from '../errors.js';
import { descriptor, p2pCall } from './mpi-calls.js';

// MPI counts in C ints: a 2 GiB point-to-point batch crashed the process (probe V), one past 4 GiB would have
// written over an earlier message's bytes; refused before any buffer is staged or MPI is called
it('counts past 2^31 − 1 are refused, typed, before MPI sees them', () => {
  // 2 × 1.1 GiB of pages never touched (the kernel maps them on first write)
  const big = () => new Float32Array(0.275 * 2 ** 30);
  const ops = [
    { op: 'isend' as const, buf: big(), peer: 1 },
    { op: 'isend' as const, buf: big(), peer: 1, tag: 1 },
  ];
  expect(() => p2pCall(ops)).toThrow(InvalidArgumentError);
  expect(() => p2pCall(ops)).toThrow(/batchIsendIrecv: \d+ bytes .* C ints \(at most 2\^31 − 1\)/);
  expect(() => p2pCall([{ op: 'isend', buf: new Float32Array(4), peer: 1 }])).not.toThrow();
  expect(() => descriptor(2, 'allReduce', 'float32', 'sum', 0, 2 ** 31)).toThrow(/allReduce: 2147483648 elements/);
});

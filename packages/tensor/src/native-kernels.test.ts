import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { BackendError } from './errors.js';
import { getNumThreads, setNumThreads, useNativeKernels } from './index.js';
import { defaultNumThreads } from './native-kernels.js';

/** The start-up line of a fresh process importing @ddp/tensor with `env`. */
function startupLine(env: Record<string, string>): string {
  const script = "await import('@ddp/tensor')";
  const { stderr } = spawnSync(
    process.execPath,
    ['--conditions=@ddp/source', '--import', 'tsx', '--input-type=module', '-e', script],
    {
      cwd: new URL('..', import.meta.url),
      env: { ...process.env, DDP_BACKEND: '', ...env },
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  const lines = stderr.split('\n').filter((l) => l.startsWith('ddp: native kernels'));
  return lines.length === 1 ? lines[0] : `(${lines.length} start-up lines in: ${stderr})`;
}

describe('native kernels: start-up and threads', () => {
  const native = useNativeKernels(true);

  it('says once at start-up which kernels are native, or that DDP_NATIVE=0 keeps them off', () => {
    expect(startupLine({ DDP_NATIVE: '0' })).toBe('ddp: native kernels off (DDP_NATIVE=0)');
    const on = startupLine({ DDP_NUM_THREADS: '1' });
    const kernels = ['BatchMatMul', 'Conv2D', 'Conv2DBackpropInput', 'Conv2DBackpropFilter', 'Sum', 'Tile', 'Exp'];
    const fused = ['LayerNorm', 'LayerNormGrad', 'Gelu', 'GeluGrad', 'ReluGrad', 'Softmax', 'SoftmaxGrad', 'BiasAdd'];
    const names = [...kernels, ...[...fused, 'ChannelSum', 'RoundToHalf'].map((k) => `Ddp${k}`)].join(', ');
    if (native) expect(/^ddp: native kernels on \(OpenBLAS [^,]+, 1 thread\): (.*)$/.exec(on)?.[1]).toBe(names);
    else
      expect(on).toMatch(
        /^ddp: native kernels off \((addon not built|addon failed|@ddp\/native-kernels is not installed)/,
      );
  });

  it('takes DDP_NUM_THREADS, else OMP_NUM_THREADS, else the cores shared among the local ranks', () => {
    const cores = availableParallelism();
    expect(defaultNumThreads({ DDP_NUM_THREADS: '3', OMP_NUM_THREADS: '5' })).toBe(3);
    expect(defaultNumThreads({ OMP_NUM_THREADS: '5' })).toBe(5);
    expect(defaultNumThreads({ OMP_NUM_THREADS: '4,2' })).toBe(4);
    expect(defaultNumThreads({ LOCAL_WORLD_SIZE: '2' })).toBe(Math.max(1, Math.floor(cores / 2)));
    expect(defaultNumThreads({ LOCAL_WORLD_SIZE: String(cores * 4) })).toBe(1);
    expect(defaultNumThreads({})).toBe(cores);
    for (const bad of ['0', '-1', 'two', '1.5', ''])
      expect(() => defaultNumThreads({ DDP_NUM_THREADS: bad })).toThrow(BackendError);
  });

  it('sets and reports the thread count, refusing non-positive ones', () => {
    const before = getNumThreads();
    setNumThreads(1);
    expect(getNumThreads()).toBe(1);
    expect(() => setNumThreads(0)).toThrow(BackendError);
    setNumThreads(before);
  });
});

// The MLP the data-parallel bench trains, as a factory DataParallel's replica threads can import:
// Linear(W/2 → W), GELU, (Linear(W → W), GELU) × (depth − 2), Linear(W → W/2); W and depth from
// BENCH_MLP_WIDTH / BENCH_MLP_DEPTH (worker threads inherit the environment).
import { GELU, Generator, Linear, Sequential, type TensorModule } from '@ddp/nn';

export function createModule(): Sequential {
  const width = Number(process.env.BENCH_MLP_WIDTH ?? 1024);
  const depth = Number(process.env.BENCH_MLP_DEPTH ?? 4);
  const dims = [width / 2, ...Array<number>(depth - 1).fill(width), width / 2];
  const generator = new Generator(0);
  const layers: TensorModule[] = [];
  dims.slice(1).forEach((d, i) => {
    layers.push(new Linear(dims[i], d, { generator }));
    if (i < dims.length - 2) layers.push(new GELU());
  });
  return new Sequential(...layers);
}

"""PyTorch side of `pnpm bench clip --step`: apps/clip's step timer (src/step-timer.ts) for the twin.

One process, one thread: the twin's model and loss (clip_twin.py, in a world of one), forward,
loss and backward of `batch` pairs per step (step-timer.ts's images and tokens), no optimizer.
Prints one JSON line: the median wall and CPU milliseconds per step over the first `steps` timed
steps after 5 untimed ones (early) and over the last `steps` after `warmup` more (steady), as
step-timer.ts does.

  python3 clip_step.py <batch> <steps> <warmup>
"""
import json
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist

import clip_twin  # sets one thread


def main():
    batch, steps, warmup = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group('gloo', init_method=f'file://{os.path.join(tmp, "store")}', rank=0, world_size=1)
        torch.manual_seed(0)
        model = clip_twin.Clip()
        i = torch.arange(batch * 28 * 56, dtype=torch.float64)  # step-timer.ts's images: four pixels in five dark
        images = torch.where(i % 5 == 0, (i * 7919) % 255 / 255, 0.0).float().reshape(batch, 1, 28, 56)
        tokens = torch.arange(2 * batch).reshape(batch, 2) * 7 % 10

        def step():
            image, text = model(images, tokens)
            clip_twin.clip_loss(image, text, model.logitScale, 100).backward()
            model.zero_grad(set_to_none=True)

        for _ in range(5):
            step()
        wall, cpu = [], []
        for _ in range(steps + warmup + steps):
            t, c = time.perf_counter(), time.process_time()
            step()
            wall.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
        dist.destroy_process_group()
    median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    early, steady = slice(0, steps), slice(-steps, None)
    print(json.dumps({'wallMs': median(wall[steady]), 'cpuMs': median(cpu[steady]),
                      'earlyWallMs': median(wall[early]), 'earlyCpuMs': median(cpu[early])}))


if __name__ == '__main__':
    main()

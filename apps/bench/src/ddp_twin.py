"""PyTorch peer of `pnpm bench ddp`: torch DDP (gradient_as_bucket_view) over Gloo on the same MLP and batch.

One process per rank with the torchrun environment, started by apps/bench/src/lib/world.ts;
one thread per rank. Rank 0 prints one `SAMPLE {json}` line: the median step time (ms) and
its peak RSS (MiB).

  python3 ddp_twin.py <dims json> <batch> <steps> <warmup>
"""
import json, os, sys, time, torch, torch.nn as nn, torch.distributed as dist
torch.set_num_threads(1)
dims, batch, steps, warmup = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
dist.init_process_group('gloo')
layers = []
for i in range(len(dims) - 1):
    layers.append(nn.Linear(dims[i], dims[i + 1]))
    if i < len(dims) - 2: layers.append(nn.GELU())
model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers), gradient_as_bucket_view=True)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(batch, dims[0]), torch.randn(batch, dims[-1])
times = []
for s in range(warmup + steps):
    dist.barrier()
    t0 = time.perf_counter()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if s >= warmup: times.append((time.perf_counter() - t0) * 1e3)
times.sort()
import resource
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if dist.get_rank() == 0: print('SAMPLE ' + json.dumps({'torch': times[len(times) // 2], 'info:peakRssMiB': peak}), flush=True)
dist.destroy_process_group()

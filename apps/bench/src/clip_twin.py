"""PyTorch twin of apps/clip (`pnpm bench clip`): the same run in torch DDP over Gloo.

One process per rank with the torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), started by apps/bench/src/lib/world.ts; one thread per rank, like the ddp
ranks (tfjs wasm runs single-threaded under Node). Everything the run depends on comes from
the directory apps/clip's `--dump-init` wrote: initial weights, every global batch as
MNIST image-index pairs, the evaluated test pairs, the caption tokens, optimizer groups and
schedule. Rank 0 prints one `SAMPLE {json}` line per step and per evaluation.

  python3 clip_twin.py <dump dir> <checkpoint dir> [<max steps>]
"""
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
torch.set_num_interop_threads(1)

EVAL_CHUNK = 250  # images per forward in evaluation, as apps/clip/src/eval.ts


def read_safetensors(path):
    """name → numpy array (F32 and I32: all the dump holds)."""
    with open(path, 'rb') as f:
        raw = f.read()
    (n,) = struct.unpack('<Q', raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop('__metadata__', None)
    dtypes = {'F32': np.float32, 'I32': np.int32}
    out = {}
    for name, info in header.items():
        begin, end = info['data_offsets']
        values = np.frombuffer(raw, dtype=dtypes[info['dtype']], count=(end - begin) // 4, offset=8 + n + begin)
        out[name] = values.reshape(info['shape'])
    return out


def read_idx(path):
    """An MNIST IDX file (unsigned bytes, big-endian dims) as a numpy array."""
    with open(path, 'rb') as f:
        raw = f.read()
    dims = raw[3]
    shape = struct.unpack('>' + 'I' * dims, raw[4:4 + 4 * dims])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


class Pairs:
    """Two MNIST digits side by side (28×56) and their word tokens, from image-index pairs."""

    def __init__(self, mnist_dir, prefix):
        path = os.path.join(mnist_dir, prefix)
        self.images = torch.from_numpy(read_idx(f'{path}-images-idx3-ubyte').copy())
        self.labels = torch.from_numpy(read_idx(f'{path}-labels-idx1-ubyte').astype(np.int64))

    def batch(self, pairs):
        """pairs [B, 2] (left, right image) → images [B, 1, 28, 56] in [0, 1], tokens [B, 2]."""
        pairs = torch.from_numpy(np.ascontiguousarray(pairs)).long()
        images = torch.cat([self.images[pairs[:, 0]], self.images[pairs[:, 1]]], dim=2).float().div_(255).unsqueeze(1)
        return images, self.labels[pairs]


class Block(nn.Module):
    """Pre-norm transformer block, names as @ddp/nn's TransformerBlock: x + attn(ln1 x), then x + mlp(ln2 x)."""

    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class Clip(nn.Module):
    """apps/clip/src/model.ts layer for layer, with its state-dict names."""

    def __init__(self, embed_dim=64, text_dim=32):
        super().__init__()
        self.imageStem = nn.Sequential(nn.Conv2d(1, 16, 5, stride=2, padding=2), nn.ReLU())
        self.imageBody = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten())
        self.imageProj = nn.Linear(32 * 7 * 14, embed_dim)
        self.tokenEmbedding = nn.Embedding(10, text_dim)
        self.positions = nn.Parameter(torch.zeros(2, text_dim))
        self.textBlock = Block(text_dim, 2)
        self.textNorm = nn.LayerNorm(text_dim)
        self.textProj = nn.Linear(2 * text_dim, embed_dim)
        self.logitScale = nn.Parameter(torch.zeros(()))

    def encode_image(self, images):
        return self.imageProj(self.imageBody(self.imageStem(images)))

    def encode_text(self, tokens):
        h = self.tokenEmbedding(tokens) + self.positions
        return self.textProj(self.textNorm(self.textBlock(h)).reshape(tokens.shape[0], -1))

    def forward(self, images, tokens):
        return self.encode_image(images), self.encode_text(tokens)


class GatherWithGrad(torch.autograd.Function):
    """All-gather along dim 0 (equal rows per rank); backward: each rank's rows of the gradient summed over ranks."""

    @staticmethod
    def forward(ctx, x):
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        ctx.rows = x.shape[0]
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad)
        start = dist.get_rank() * ctx.rows
        return grad[start:start + ctx.rows]


def clip_loss(image, text, log_scale, max_scale):
    """@ddp/contrastive's clipLoss: [local × global] logits both ways, this rank's CE sum × world / global batch."""
    both = torch.cat([F.normalize(image, dim=-1), F.normalize(text, dim=-1)], dim=1)
    d = image.shape[1]
    gathered = GatherWithGrad.apply(both)
    n = image.shape[0]
    labels = torch.arange(dist.get_rank() * n, (dist.get_rank() + 1) * n)
    scale = torch.exp(torch.clamp(log_scale, max=math.log(max_scale)))
    per_image = F.cross_entropy(both[:, :d] @ gathered[:, d:].T * scale, labels, reduction='sum')
    per_text = F.cross_entropy(both[:, d:] @ gathered[:, :d].T * scale, labels, reduction='sum')
    return (per_image + per_text) * (dist.get_world_size() / (2 * gathered.shape[0]))


def warmup_cosine_lr(step, base, warmupSteps, totalSteps, minLr):
    """@ddp/nn's warmupCosineLr."""
    if step < warmupSteps:
        return base * step / warmupSteps
    if step >= totalSteps:
        return minLr
    progress = (step - warmupSteps) / max(1, totalSteps - warmupSteps)
    return minLr + (base - minLr) * 0.5 * (1 + math.cos(math.pi * progress))


@torch.no_grad()
def zero_shot_top1(model, test, test_pairs, caption_tokens):
    """Each of the first test pairs (rank r takes r, r+N, …) against all 100 captions; hits summed over ranks."""
    model.eval()
    text = F.normalize(model.encode_text(caption_tokens), dim=-1)
    mine = test_pairs[dist.get_rank()::dist.get_world_size()]
    hits = 0
    for at in range(0, len(mine), EVAL_CHUNK):
        images, tokens = test.batch(mine[at:at + EVAL_CHUNK])
        predicted = (F.normalize(model.encode_image(images), dim=-1) @ text.T).argmax(dim=1)
        hits += int((predicted == tokens[:, 0] * 10 + tokens[:, 1]).sum())
    model.train()
    counts = torch.tensor([hits, len(mine)], dtype=torch.float64)
    dist.all_reduce(counts)
    return (counts[0] / counts[1]).item()


def main():
    dump, ckpt_dir = sys.argv[1], sys.argv[2]
    run = json.load(open(os.path.join(dump, 'run.json')))
    max_steps = int(sys.argv[3]) if len(sys.argv) > 3 else run['steps']
    if run['gradAccum'] != 1:
        raise SystemExit(f'clip_twin: --grad-accum {run["gradAccum"]} is not supported (1 only)')
    dist.init_process_group('gloo')
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != run['world'] or run['batchSize'] % world != 0:
        raise SystemExit(f'clip_twin rank {rank}: world {world}, but the dump is for {run["world"]} ranks'
                         f' and a global batch of {run["batchSize"]}')
    model = Clip()
    weights = read_safetensors(os.path.join(dump, 'init.safetensors'))
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()})
    params = dict(model.named_parameters())
    groups = [{'params': [params[n] for n in g['params']], 'lr': g['lr'], 'betas': tuple(g['betas']), 'eps': g['eps'],
               'weight_decay': g['weightDecay']} for g in run['optimizer']]
    optimizer = torch.optim.AdamW(groups)
    peak = [g['lr'] for g in groups]
    ddp = nn.parallel.DistributedDataParallel(model)
    data = read_safetensors(os.path.join(dump, 'data.safetensors'))
    train = Pairs(run['mnistDir'], 'train')
    test = Pairs(run['mnistDir'], 't10k')
    caption_tokens = torch.from_numpy(data['caption_tokens'].astype(np.int64))
    log_scale_max = math.log(run['maxLogitScale'])
    for step in range(max_steps):
        started = time.perf_counter()
        images, tokens = train.batch(data['train_pairs'][step][rank::world])
        image, text = ddp(images, tokens)
        loss = clip_loss(image, text, model.logitScale, run['maxLogitScale'])
        loss.backward()
        for g, base in zip(optimizer.param_groups, peak):
            g['lr'] = warmup_cosine_lr(step, base, **run['schedule'])
        lr = optimizer.param_groups[0]['lr']
        optimizer.step()
        with torch.no_grad():
            model.logitScale.clamp_(0, log_scale_max)
        optimizer.zero_grad(set_to_none=True)
        ms = (time.perf_counter() - started) * 1e3
        # the batch's loss, as the app logs it: each rank's clip loss is its rows' share, their mean the batch's
        # (rank 0's alone was printed, 2e-2 to 1e-1 off the app's, and --check failed on it)
        losses = torch.tensor([loss.item()], dtype=torch.float64)
        dist.all_reduce(losses)
        if rank == 0:
            sample = {'step': step + 1, 'loss': losses.item() / world, 'lr': lr, 'ms': ms}
            print('SAMPLE ' + json.dumps(sample), flush=True)
        done = step + 1
        if (run['evalEvery'] > 0 and done % run['evalEvery'] == 0) or done == run['steps']:
            top1 = zero_shot_top1(model, test, data['test_pairs'], caption_tokens)
            if rank == 0:
                print('SAMPLE ' + json.dumps({'step': done, 'zeroShotTop1': top1}), flush=True)
        # the app's checkpoints (every checkpointEvery steps and at the end): rank 0 writes, all wait
        if (run['checkpointEvery'] > 0 and done % run['checkpointEvery'] == 0) or done == max_steps:
            if rank == 0:
                os.makedirs(ckpt_dir, exist_ok=True)
                state = {'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'step': done}
                torch.save(state, os.path.join(ckpt_dir, 'checkpoint.pt'))
            dist.barrier()
    # every rank has passed the last barrier: leave without Gloo's teardown, which sometimes spun for minutes
    # after the peer had gone (the bench then killed the straggler and the run failed); this only shortens the
    # twin's wall time, so ratios stay conservative
    sys.stdout.flush()
    os._exit(0)


if __name__ == '__main__':
    main()

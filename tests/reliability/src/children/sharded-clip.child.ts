// Gradient clipping under FSDP and ZeRO stage 2 (2 ranks, different data): clipGradNorm on the
// optimizer's parameters (this rank's shard, or the parameters it owns) against the norm of the
// whole gradient, taken here from an unsharded copy trained on both ranks' batches. Prints, per
// kind, what clipGradNorm said (the norm, or its error) and clipGradNormDistributed's norm.
import { type Tensor, tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { fullyShard } from '@ddp/fsdp';
import { Adam, clipGradNorm, clipGradNormDistributed, Generator, Linear, mse, Sequential, Tanh } from '@ddp/nn';
import { ZeroRedundancyOptimizer } from '@ddp/zero';

const group = await initProcessGroup({ timeoutMs: 20_000 });
const model = () => {
  const gen = new Generator(5);
  return new Sequential(new Linear(3, 6, { generator: gen }), new Tanh(), new Linear(6, 2, { generator: gen }));
};
const input = (rank: number) =>
  tensor(
    [1, 2, 3, -1, 0, 2].map((v) => v * (rank + 1)),
    [2, 3],
  );
const target = tensor([1, 0, 0, 1], [2, 2]);
const lossOf = (out: Tensor) => tidy(() => mse(out, target));

// the whole gradient: the mean of both ranks' losses (each a mean over its own rows), as the averaging gives
const whole = model();
for (const rank of [0, 1]) {
  const loss = tidy(() => lossOf(whole.forward(input(rank))).mul(0.5));
  await loss.backward();
}
const want = clipGradNorm(whole.parameters(), 1e-3);

const said = (f: () => number) => {
  try {
    return f();
  } catch (e) {
    return `${(e as Error).name}: ${(e as Error).message}`;
  }
};
const result: Record<string, unknown> = { rank: group.rank, want };

const root = fullyShard(model());
await (await lossOf(await root.forward(input(group.rank)))).backward();
result.fsdp = { clipGradNorm: said(() => clipGradNorm(root.parameters(), 1e-3)) };
(result.fsdp as Record<string, unknown>).distributed = await clipGradNormDistributed(root.parameters(), 1e-3, {
  groups: [group],
});

const plain = model();
const zero = new ZeroRedundancyOptimizer(plain.parameters(), Adam, { lr: 0.1 }, { stage: 2 });
await lossOf(plain.forward(input(group.rank))).backward();
result.zero = { clipGradNorm: said(() => clipGradNorm(plain.parameters(), 1e-3)) };
(result.zero as Record<string, unknown>).distributed = await clipGradNormDistributed(plain.parameters(), 1e-3, {
  groups: [group],
});
zero.zeroGrad();
console.log(`RESULT ${JSON.stringify(result)}`);
await destroyProcessGroup();

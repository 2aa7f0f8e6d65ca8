import { runWorld } from '@ddp/launch/testing';
import { expect, it } from 'vitest';

it('misuse raises typed errors on every rank, naming the rank or the file', async () => {
  const { results } = await runWorld<{ rank: number; errors: Record<string, string> }>({
    script: new URL('./test/errors.child.ts', import.meta.url),
    nprocs: 2,
    timeoutMs: 60_000,
  });
  for (const { rank, errors } of results) {
    expect(errors['forward without the root']).toMatch(
      new RegExp(`^FSDPError: rank ${rank}: Sequential's parameters are not gathered`),
    );
    expect(errors['sharded twice']).toMatch(/^FSDPError: fullyShard: Linear is sharded already/);
    // before: accepted, then comm's "a Uint16Array needs opts.dtype" at the first forward
    expect(errors['a commDtype from a config']).toMatch(
      /^FSDPError: fullyShard: commDtype must be one of 'float16', 'bfloat16', got "float32"/,
    );
    expect(errors['inner unit after its parent']).toMatch(
      /^FSDPError: fullyShard: Linear's parameters belong to an enclosing unit already; apply it bottom-up/,
    );
    expect(errors['a unit with an async forward']).toMatch(
      new RegExp(`^FSDPError: rank ${rank}: AsyncForward's forward is async; a fullyShard unit's forward must be sync`),
    );
    const changed = 'the parameters requiring grad changed after fullyShard';
    for (const [what, problem] of [
      [
        'unfrozen after fullyShard',
        '0.weight requires grad but is in no shard; 0.bias requires grad but is in no shard',
      ],
      ['frozen after fullyShard', '0.weight is sharded but frozen; 0.bias is sharded but frozen'],
      [
        'layer replaced after fullyShard',
        '0.weight requires grad but is in no shard; 0.bias requires grad but is in no shard; ' +
          '2 sharded parameter\\(s\\) no longer in the module',
      ],
      ['parameter added after fullyShard', '2.scale requires grad but is in no shard'],
    ]) {
      expect(errors[what], what).toMatch(new RegExp(`^FSDPError: rank ${rank}: ${problem}.*: ${changed}`));
    }
    // before: accepted, then a TensorDisposedError in the first forward or backward
    expect(errors['a module shared by a unit and a parent outside it']).toMatch(
      /^FSDPError: fullyShard: Linear shares a parameter with a unit below Sequential \(tied weights\)/,
    );
    expect(errors['load from an empty directory']).toMatch(/^ShardedCheckpointError: no complete FSDP checkpoint at /);
    // before: TypeError: Cannot read properties of undefined (reading 'paramGroups')
    expect(errors['a save without its optimizer']).toMatch(
      /^ShardedCheckpointError: saveFSDPCheckpoint: contents.optimizer missing \(required\)/,
    );
    // before: each rank trained on from the entry it saw, silently (probe AO)
    expect(errors['ranks loaded different entries']).toMatch(
      new RegExp(
        `^FSDPError: rank ${rank}: ranks 0 and 1 loaded different checkpoint entries \\(this rank: .*/${'ab'[rank]}/`,
      ),
    );
  }
}, 60_000);

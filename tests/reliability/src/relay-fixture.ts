import { TCPStoreServer } from '@ddp/comm';
import { runWorld, type WorldRun } from '@ddp/launch/testing';
import { childScript } from './child-script.js';
import { type FaultPlan, FaultRelay } from './relay.js';

/** A relay plus a store server behind it, and a world of children/relayed.child.ts wired through both. */
export interface RelayedWorld {
  relay: FaultRelay;
  run: (
    args: string[],
    opts: {
      script?: string;
      nproc: number;
      timeoutMs: number;
      env?: Record<string, string>;
      onResult?: (rank: number, r: Record<string, unknown>) => void;
    },
  ) => Promise<WorldRun<Record<string, unknown>>>;
  close: () => Promise<void>;
}

const SECRET = 'reliability-secret';

export async function relayedWorld(plan: FaultPlan = {}, seed = 1): Promise<RelayedWorld> {
  const relay = new FaultRelay('127.0.0.1', plan, seed);
  const control = await relay.listenControl();
  const store = await TCPStoreServer.listen({ host: '127.0.0.1', port: 0, secret: SECRET });
  const front = await relay.route({ host: '127.0.0.1', port: store.port }, 'store');
  return {
    relay,
    run: (args, opts) =>
      runWorld<Record<string, unknown>>({
        script: childScript(opts.script ?? 'collectives.child.ts'),
        nprocs: opts.nproc,
        args,
        timeoutMs: opts.timeoutMs,
        secret: SECRET,
        onResult: opts.onResult,
        env: {
          DDP_TRANSPORT: 'tcp',
          RELAY_CONTROL: `${control.host}:${control.port}`,
          STORE_FRONT: `${front.host}:${front.port}`,
          ...opts.env,
        },
      }),
    close: async () => {
      await relay.close();
      await store.close();
    },
  };
}

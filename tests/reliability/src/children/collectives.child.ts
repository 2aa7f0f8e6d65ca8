import { collectiveSuite, describeError } from '../suite.js';
import { connectWorld } from './connect.js';

/**
 * A rank running the collective suite. Args: `suite <rounds>` runs it `rounds` times and
 * reports failures; `idle` runs it once, reports `idle`, waits 1.5 s and reports how the
 * next suite ends; `loop [--exit-code]` runs it until an error, reports the error, and
 * exits 0 (or 1 with --exit-code, so ddp-run sees a failure).
 * The world may sit behind a FaultRelay (see connect.ts).
 */
const [mode, rounds = '1'] = process.argv.slice(2);
const { pg, close } = await connectWorld(Number(process.env.DDP_TIMEOUT_MS) || 10_000);
console.log('RESULT {"ready":true}');
let salt = 0;
let code = 0;
try {
  if (mode === 'idle') {
    // one suite, then report idle and wait (heartbeats only) until a fault ends the world
    await collectiveSuite(pg, ++salt, [7]);
    console.log('RESULT {"idle":true}');
    try {
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await collectiveSuite(pg, ++salt);
      console.log(`RESULT ${JSON.stringify({ error: null })}`);
    } catch (e) {
      console.log(`RESULT ${JSON.stringify(describeError(e))}`);
    }
  } else if (mode === 'suite') {
    const failures: string[] = [];
    for (let i = 0; i < Number(rounds); i++) failures.push(...(await collectiveSuite(pg, ++salt)));
    console.log(`RESULT ${JSON.stringify({ failures, rounds: salt })}`);
  } else {
    const started = Date.now();
    try {
      for (let i = 0; i < 100_000; i++) await collectiveSuite(pg, ++salt, [7, 4096]);
      console.log(`RESULT ${JSON.stringify({ error: null })}`);
    } catch (e) {
      console.log(`RESULT ${JSON.stringify({ ...describeError(e), afterMs: Date.now() - started, rounds: salt })}`);
      if (process.argv.includes('--exit-code')) code = 1;
    }
  }
} finally {
  await close();
}
process.exit(code);

// The compiled twin of a workspace test script: tooling/vitest's global setup compiles the workspace to
// JavaScript once per state of the sources and names it in DDP_TEST_COMPILED ({ source, twin }), so
// the ranks a test starts run plain node instead of each starting tsx (~0.8 s of CPU per rank).
import { existsSync } from 'node:fs';
import { scriptArgs } from '../world.js';

export interface RankScript {
  script: string;
  /** Whether @ddp packages resolve to their src/ (through tsx), as in the workspace; false for the twin. */
  sourceConditions: boolean;
  /** Node flags the script needs: the twin's stack traces name the .ts lines. */
  nodeArgs: string[];
}

const SOURCE_MAPS = '--enable-source-maps';

/** `script` as a rank runs it: its twin's .js when the test run has one, else itself under tsx. */
export function rankScript(script: string): RankScript {
  const compiled = process.env.DDP_TEST_COMPILED;
  if (compiled && script.endsWith('.ts')) {
    const { source, twin } = JSON.parse(compiled) as { source: string; twin: string };
    const js = `${twin}${script.slice(source.length, -'.ts'.length)}.js`;
    if (script.startsWith(source) && existsSync(js))
      return { script: js, sourceConditions: false, nodeArgs: [SOURCE_MAPS] };
  }
  return { script, sourceConditions: true, nodeArgs: [] };
}

/** Node's arguments that run `script` with `args` as rankScript says: for a test that starts node itself. */
export function nodeArgsFor(script: string, args: string[] = []): string[] {
  const run = rankScript(script);
  return [...run.nodeArgs, ...scriptArgs(run.script, args, run.sourceConditions)];
}

/**
 * launch()'s script, sourceConditions and env for `script` as rankScript runs it: for a test that calls
 * launch() itself (runWorld does). Node flags go through NODE_OPTIONS, launch() has no other way.
 */
export function launchOptionsFor(
  script: string,
  env: NodeJS.ProcessEnv = process.env,
): { script: string; sourceConditions: boolean; env: NodeJS.ProcessEnv } {
  const run = rankScript(script);
  const nodeOptions = [env.NODE_OPTIONS, ...run.nodeArgs].filter(Boolean).join(' ');
  return {
    script: run.script,
    sourceConditions: run.sourceConditions,
    env: nodeOptions === '' ? env : { ...env, NODE_OPTIONS: nodeOptions },
  };
}

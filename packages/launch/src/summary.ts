import type { RankExit, WorldResult } from './world.js';

/** "exited with code 3", "was killed by SIGKILL", "could not start: …". */
export function describeExit(exit: RankExit): string {
  if (exit.spawnError !== undefined) return `could not start: ${exit.spawnError}`;
  if (exit.signal !== null) return `was killed by ${exit.signal}`;
  return `exited with code ${String(exit.code)}`;
}

const ERROR_LINE = /^\s*(Uncaught\s+)?[\w$.]*(Error|Exception)\b/;
const NODE_VERSION_LINE = /^Node\.js v\d/;

/**
 * The lines that say why a rank failed: its last error line ("TypeError: …") and the first
 * stack frames after it, else its last few lines of output.
 */
export function lastErrorLines(exit: RankExit, max = 3): string[] {
  const source = exit.stderrTail.some((l) => l.trim() !== '') ? exit.stderrTail : exit.stdoutTail;
  const lines = source.filter((l) => l.trim() !== '' && !NODE_VERSION_LINE.test(l));
  for (let i = lines.length - 1; i >= 0; i--) {
    if (ERROR_LINE.test(lines[i] ?? '')) return lines.slice(i, i + max);
  }
  return lines.slice(-max);
}

function clip(line: string, width = 160): string {
  return line.length > width ? `${line.slice(0, width - 1)}…` : line;
}

/** How many other ranks the summary lists one per line before it counts the rest. */
const LISTED_RANKS = 12;

/** The one-screen report of a failed world, every line prefixed `[ddp-run]`. */
export function failureSummary(world: WorldResult, restartsUsed: number, maxRestarts: number): string {
  const failed = world.failed;
  if (failed === undefined) return '';
  const where = `local rank ${failed.localRank}, pid ${String(failed.pid ?? '-')}`;
  const lines = [`FAILED: rank ${failed.rank} ${describeExit(failed)} (${where})`];
  const errors = lastErrorLines(failed);
  if (errors.length > 0) lines.push('  last output:', ...errors.map((l) => `    ${clip(l)}`));
  if (maxRestarts > 0) lines.push(`  restarts: ${restartsUsed} of ${maxRestarts} used`);
  const others = world.exits.filter((e) => e !== failed);
  if (others.length > 0) lines.push('  other ranks:');
  for (const other of others.slice(0, LISTED_RANKS)) {
    const how = other.endedByLauncher ? `${describeExit(other)} (ended by ddp-run)` : describeExit(other);
    const why = other.code !== 0 && !other.endedByLauncher ? ` — ${clip(lastErrorLines(other, 1)[0] ?? '', 100)}` : '';
    lines.push(`    rank ${other.rank}: ${how}${why}`);
  }
  if (others.length > LISTED_RANKS) lines.push(`    … and ${others.length - LISTED_RANKS} more`);
  return lines.map((l) => `[ddp-run] ${l}\n`).join('');
}

import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ip, TwoHosts } from './index.js';

const hosts = new TwoHosts('nt', '10.231.79');
const skip = hosts.setUp();
if (skip) console.log(`netns test skipped: ${skip}`);

/** Whether a TCP connection from host 0 reaches host 1's listener. */
function reaches(): boolean {
  const dial =
    `require('net').connect(7000, '${hosts.addr[1]}').on('connect', () => ` +
    `process.exit(0)).on('error', () => process.exit(1)); setTimeout(() => process.exit(2), 1500)`;
  const [cmd, ...prefix] = hosts.exec(0);
  try {
    execFileSync(cmd, [...prefix, process.execPath, '-e', dial], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(skip !== null)('two hosts', () => {
  it('joins the namespaces by a shapeable link, and removes them', async () => {
    try {
      const [cmd, ...prefix] = hosts.exec(1);
      const listener = spawn(cmd, [
        ...prefix,
        process.execPath,
        '-e',
        `require('net').createServer((s) => s.end()).listen(7000, '${hosts.addr[1]}', () => console.log('up'))`,
      ]);
      await once(listener.stdout, 'data');
      expect(reaches()).toBe(true);
      hosts.limit('10mbit');
      expect(execFileSync('tc', ['-n', hosts.ns[0], 'qdisc', 'show', 'dev', hosts.veth[0]]).toString()).toMatch(
        /tbf .*rate 10Mbit/,
      );
      hosts.linkDown(1);
      expect(reaches()).toBe(false);
    } finally {
      hosts.tearDown();
    }
    expect(ip('netns', 'list')).not.toContain(hosts.ns[0]);
  });
});

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import type { TestContext } from 'node:test';
import { alive, gone } from './processes.js';

/**
 * A stand-in for a test process: `script` (an ES module's text) run by node, to be ended the way
 * the test runner ends a file that ran out of time (SIGTERM), so that a test can check what the
 * processes it started become. Killed when the test ends, if it still runs.
 */
export function standInTestProcess(t: TestContext, script: string) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  return {
    /** the next line it prints (it must print one) */
    async line(): Promise<string> {
      const next = await lines.next();
      if (next.done) throw new Error('the stand-in test process ended before it printed a line');
      return next.value;
    },
    /** SIGTERM, as the test runner sends a file out of time; resolves once it has exited */
    async end(): Promise<void> {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * Resolves once `pid`, a process the test did not start itself (a stand-in's child), is gone. If
 * the test ends before (it failed), the process is killed then, so that it does not outlive the
 * test; not once it has gone, when its id may be another process's.
 */
export async function goneOrKilledAfter(t: TestContext, pid: number, what: string): Promise<void> {
  let wentAway = false;
  t.after(() => {
    if (!wentAway && alive(pid)) process.kill(pid, 'SIGKILL');
  });
  await gone(pid, what);
  wentAway = true;
}

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { killOnExit } from '@agentq/test-support';

const START = fileURLToPath(new URL('../../../../scripts/start.mjs', import.meta.url));

export interface Started {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/**
 * `npm start`'s script (scripts/start.mjs) with the demo executor at full speed and `env`
 * (`o.underShell`: run by a shell, `child` is the shell). It runs
 * its coordinator and launcher in process groups of their own, which it ends on SIGTERM (or on any
 * exit it sees): it gets SIGTERM if this test process ends first (a file out of time), SIGKILL
 * would leave them running.
 */
export function spawnNpmStart(cwd: string, env: Record<string, string>, o: { underShell?: boolean } = {}): Started {
  const options = {
    cwd,
    env: { ...process.env, AGENTQ_DEMO_STEP_MS: '0', NO_COLOR: '1', ...(o.underShell ? { npm_lifecycle_event: 'start' } : {}), ...env },
    stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'],
  };
  const child = o.underShell
    ? // as `npm start` runs it (`sh -c 'npm run build && node scripts/start.mjs'`, with npm's
      // variables): under a shell that waits for it rather than exec'ing it
      spawn('sh', ['-c', '"$0" "$1"; :', process.execPath, START], options)
    : spawn(process.execPath, [START], options);
  killOnExit(child, 'SIGTERM');
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** Resolve with stdout once it contains `text`; reject if the script exits first. */
export function until(s: Started, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (s.stdout().includes(text)) {
        s.child.stdout?.off('data', check);
        resolve(s.stdout());
      }
    };
    s.child.stdout?.on('data', check);
    s.exited.then((code) =>
      reject(new Error(`npm start exited (${code}) before "${text}":\n${s.stdout()}\n${s.stderr()}`)),
    );
    check();
  });
}

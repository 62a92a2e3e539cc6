import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { killOnExit, trackRunning } from '@agentq/test-support';

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

export type LogLine = Record<string, unknown> & { msg?: string };

export interface CoordinatorProcess {
  child: ChildProcess;
  url: string;
  lines: LogLine[];
  stderr(): string;
  /** the first log line (already written, or to come) that `match` accepts */
  waitFor(match: (l: LogLine) => boolean): Promise<LogLine>;
  /** SIGKILL, and wait for the exit */
  kill(): Promise<void>;
}

/**
 * The real coordinator program (`node apps/coordinator/dist/src/main.js`) on 127.0.0.1 and a
 * free port, configured by `env`; resolves once it logged `coordinator ready` (so LOG_LEVEL must
 * be info or lower). Killed when the test ends.
 */
export async function spawnCoordinatorProcess(
  t: TestContext,
  env: Record<string, string>,
  /** called with the process as soon as it is spawned (to signal it while it starts) */
  spawned?: (child: ChildProcess) => void,
): Promise<CoordinatorProcess> {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killOnExit(child);
  spawned?.(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const end = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  trackRunning(t, end);
  t.after(end);
  const { lines, stderr, waitFor } = followLog(child);
  const ready = await waitFor((l) => l.msg === 'coordinator ready');
  return {
    child,
    url: String(ready['url']),
    lines,
    stderr,
    waitFor,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** A coordinator process's JSON log lines as they come (to wait on), and its stderr. */
export function followLog(child: ChildProcess) {
  const lines: LogLine[] = [];
  const waiters: Array<{ match: (l: LogLine) => boolean; resolve: (l: LogLine) => void }> = [];
  createInterface({ input: child.stdout! }).on('line', (text) => {
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      return;
    }
    lines.push(line);
    for (const w of [...waiters]) {
      if (!w.match(line)) continue;
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(line);
    }
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += String(d)));
  return {
    lines,
    stderr: () => stderr,
    /** the first log line (from now on, or already seen if `past`) that `match` accepts */
    waitFor(match: (l: LogLine) => boolean, past = true): Promise<LogLine> {
      const seen = past ? lines.find(match) : undefined;
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        waiters.push({ match, resolve });
        // the signal too: killed (SIGKILL, from outside or the kernel) says something else than crashed
        child.once('exit', (code, signal) =>
          reject(new Error(`coordinator ${child.pid} exited (${code ?? signal}) first; its last lines: ${JSON.stringify(lines.slice(-3))}; stderr: ${stderr}`)),
        );
      });
    },
  };
}

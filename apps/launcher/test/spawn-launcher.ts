import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killOnExit, trackRunning } from '@agentq/test-support';

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

export interface LauncherProcess {
  child: ChildProcess;
  /** resolves with the first log line whose msg matches */
  logged(msg: RegExp): Promise<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
}

/**
 * The real launcher program, as `npm run launcher` runs it; killed after the test if still
 * running. Its state directory is a fresh temporary one unless `env` names one.
 */
export function spawnLauncher(t: TestContext, args: string[], env: Record<string, string> = {}): LauncherProcess {
  const ownState = mkdtempSync(join(tmpdir(), 'agentq-launcher-state-'));
  const child = spawn(process.execPath, [MAIN, ...args], {
    env: { ...process.env, AGENTQ_LOG_LEVEL: 'debug', AGENTQ_STATE_DIR: env['AGENTQ_STATE_DIR'] ?? ownState, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killOnExit(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const end = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  trackRunning(t, end);
  t.after(async () => {
    await end();
    rmSync(ownState, { recursive: true, force: true, maxRetries: 5 });
  });
  const lines: Array<Record<string, unknown>> = [];
  const waiters: Array<{ msg: RegExp; resolve: (l: Record<string, unknown>) => void }> = [];
  createInterface({ input: child.stdout! }).on('line', (text) => {
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return;
    }
    lines.push(line);
    for (const w of [...waiters]) {
      if (w.msg.test(String(line['msg']))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  return {
    child,
    exited,
    stderr: () => stderr,
    logged: (msg) =>
      new Promise((resolve) => {
        const found = lines.find((l) => msg.test(String(l['msg'])));
        if (found) resolve(found);
        else waiters.push({ msg, resolve });
      }),
  };
}


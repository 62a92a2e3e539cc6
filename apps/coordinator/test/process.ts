import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AgentqClient } from '@agentq/client';
import { killOnExit, onPortAgain, tempDir, trackRunning } from '@agentq/test-support';

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

/** A coordinator in its own process (the real main.js), on a free port, killed when the test ends. */
export interface CoordinatorProcess {
  child: ChildProcess;
  url: string;
  port: number;
  client: AgentqClient;
  /** SIGKILL, and wait until the process is gone */
  kill(): Promise<void>;
}

/**
 * A temporary SQLite database URL, removed when the test ends, once the coordinator processes of
 * the test have been killed (its hook comes first, and they write into it until they are gone).
 */
export function tempDatabase(t: TestContext): string {
  return `sqlite:${join(tempDir(t, 'agentq-db-'), 'agentq.db')}`;
}

/**
 * The coordinator process again on `port`, which the test's previous one has just given up (a
 * restart). While the port was free another process may have taken it for a moment (an outgoing
 * connection's local port comes from the range port 0 does, or a test file running beside this
 * one listened on port 0): a start that failed with EADDRINUSE is tried again (onPortAgain).
 * `onBusy` is told of each refusal.
 */
export async function spawnCoordinatorOn(
  t: TestContext,
  port: number,
  env: Record<string, string>,
  onBusy?: () => void,
): Promise<CoordinatorProcess> {
  return onPortAgain(port, () => spawnCoordinator(t, { ...env, PORT: String(port) }), onBusy);
}

/**
 * Start `apps/coordinator/dist/src/main.js` with `env` (PORT defaults to 0, the next free port).
 * Resolves once it logged "coordinator ready" with its port.
 */
export async function spawnCoordinator(t: TestContext, env: Record<string, string>): Promise<CoordinatorProcess> {
  const child = spawn(process.execPath, [MAIN], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killOnExit(child);
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const exited = once(child, 'exit');
  const end = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  };
  trackRunning(t, end);
  t.after(end);
  const lines = createInterface({ input: child.stdout! });
  let port: number | undefined;
  let failure: { msg?: string; err?: { code?: string; message?: string } } | undefined;
  for await (const line of lines) {
    const entry = JSON.parse(line) as { msg?: string; port?: number; level?: number; err?: { code?: string; message?: string } };
    if (entry.msg === 'coordinator ready') {
      port = entry.port;
      break;
    }
    if ((entry.level ?? 0) >= 50) failure = entry;
  }
  if (port === undefined) {
    // its code (EADDRINUSE: a restart on a port another process took meanwhile) for the caller
    throw Object.assign(new Error(`coordinator exited before it was ready: ${failure?.msg ?? ''} ${failure?.err?.message ?? ''} ${stderr}`), {
      code: failure?.err?.code,
    });
  }
  child.stdout!.resume(); // keep draining its log
  const url = `http://127.0.0.1:${port}`;
  const client = new AgentqClient({ url });
  t.after(() => client.destroy());
  return {
    child,
    url,
    port,
    client,
    async kill() {
      await client.destroy();
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AgentqClient } from '@agentq/client';
import { endRunning, trackRunning } from './running.js';

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
  const dir = mkdtempSync(join(tmpdir(), 'agentq-db-'));
  t.after(async () => {
    await endRunning(t);
    rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
  });
  return `sqlite:${join(dir, 'agentq.db')}`;
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
  for await (const line of lines) {
    const entry = JSON.parse(line) as { msg?: string; port?: number };
    if (entry.msg === 'coordinator ready') {
      port = entry.port;
      break;
    }
  }
  if (port === undefined) throw new Error(`coordinator exited before it was ready: ${stderr}`);
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

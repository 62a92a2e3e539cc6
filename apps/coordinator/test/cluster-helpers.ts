import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AgentqClient, type SseMessage } from '@agentq/client';
import { killOnExit, trackRunning } from '@agentq/test-support';
import { spawnCoordinatorProcess, type CoordinatorProcess } from './coordinator-process.js';
import { eventJob, openEvents, tempDir as tempDirOf } from './helpers.js';
import { freshDatabaseUrl } from './pg-server.js';

/*
 * Helpers of the tests with several real coordinator processes on one PostgreSQL database
 * (pg-cluster.test.ts, pg-sigkill.test.ts). Polls are held for ten minutes and heartbeats are
 * rare, so a job or a stop that reaches a launcher parked on another coordinator within a test
 * can only have been carried by the commit notification.
 */

export const LAUNCHER_MAIN = fileURLToPath(new URL('../../../launcher/dist/src/main.js', import.meta.url));
export const SLOW = { LAUNCHER_POLL_TIMEOUT: '600', LAUNCHER_HEARTBEAT_INTERVAL: '300', LAUNCHER_HEARTBEAT_TIMEOUT: '900' };

/** `n` coordinators started at the same time on a fresh database (they migrate one at a time). */
export async function cluster(t: TestContext, n: number, env: Record<string, string> = {}): Promise<CoordinatorProcess[] | null> {
  const url = await freshDatabaseUrl(t);
  if (url === null) return null;
  return Promise.all(Array.from({ length: n }, () => spawnCoordinatorProcess(t, { DATABASE_URL: url, ...SLOW, ...env })));
}

export function clientOf(t: TestContext, url: string): AgentqClient {
  const client = new AgentqClient({ url });
  t.after(() => client.destroy());
  return client;
}

/** A temporary directory, removed when the test ends, once its coordinator processes are gone. */
export const tempDir = (t: TestContext): string => tempDirOf(t, 'agentq-cluster-');

/** An executor program (the contract: invocation on stdin, JSON events on stdout) in sh. */
export function shellExecutor(dir: string, name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\ncat > /dev/null\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/** The real launcher program; resolves with its id once registered. Killed when the test ends. */
export async function spawnLauncher(t: TestContext, dir: string, name: string, args: string[]): Promise<string> {
  // its own state directory, removed by its own hook once it has stopped: `dir` may be removed
  // first (node:test runs after-hooks in the order they were added)
  const state = mkdtempSync(join(tmpdir(), `agentq-cluster-state-${name}-`));
  const child = spawn(process.execPath, [LAUNCHER_MAIN, '--hostname', name, '--project-dir', dir, '--state-dir', state, ...args], {
    env: { PATH: process.env.PATH ?? '', AGENTQ_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killOnExit(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const end = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  trackRunning(t, end); // its executors run in `dir`
  t.after(async () => {
    await end();
    rmSync(state, { recursive: true, force: true, maxRetries: 5 });
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += String(d)));
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (text) => {
      try {
        const line = JSON.parse(text) as { msg?: string; launcher_id?: string };
        if (line.msg === 'registered' || (line.launcher_id && /regist/.test(line.msg ?? ''))) resolve(line.launcher_id!);
      } catch {
        // not a log line
      }
    });
    child.once('exit', (code) => reject(new Error(`launcher ${name} exited (${code}): ${stderr}`)));
  });
}

/**
 * An SSE stream read in the background: `opened` resolves once the coordinator accepted it
 * (every event from then on comes); `until` resolves with the first message, from the start,
 * that `match` accepts; `onMessage` sees each as it arrives.
 */
export async function watch(t: TestContext, url: string) {
  const events = openEvents(t, url);
  const seen: SseMessage[] = [];
  const waiters = new Set<() => void>();
  const listeners = new Set<(m: SseMessage) => void>();
  void (async () => {
    for (;;) {
      let m: SseMessage;
      try {
        m = await events.next();
      } catch {
        return; // closed at the end of the test
      }
      seen.push(m);
      for (const l of listeners) l(m);
      for (const w of [...waiters]) w();
    }
  })();
  await events.opened;
  return {
    until(match: (m: SseMessage) => boolean): Promise<SseMessage> {
      return new Promise((resolve) => {
        const check = () => {
          const found = seen.find(match);
          if (!found) return;
          waiters.delete(check);
          resolve(found);
        };
        waiters.add(check);
        check();
      });
    },
    onMessage(listener: (m: SseMessage) => void): void {
      listeners.add(listener);
    },
  };
}
export const isEvent = (type: string, jobId: string) => (m: SseMessage) => m.event === type && eventJob(m).job_id === jobId;


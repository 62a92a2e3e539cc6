import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import { pino, type Logger } from 'pino';
import { AgentqClient } from '@agentq/client';
import type { Job } from '@agentq/protocol';
import { startCoordinator } from '@agentq/coordinator';
import { jobEnd, onPortAgain, tempDir as tempDirOf, trackRunning } from '@agentq/test-support';
import { Launcher, resolveExecutor, type LauncherConfig, type LauncherDeps } from '../src/index.js';

/** Whether a process the test did not start is still there, and a wait until it is not: shared with the other apps' tests. */
export { alive, gone } from '@agentq/test-support';

/** Compiled fixture scripts live beside this file, in dist/test/fixtures. */
export const fixture = (name: string): string => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));

/** Logs of launchers under test: silent unless TEST_LOG=debug (or another level) is set. */
export const testLog = () => pino({ level: process.env['TEST_LOG'] ?? 'silent' });

type LogLine = Record<string, unknown>;

/** A logger that keeps every line (parsed), for waiting on and asserting about what was logged. */
export function captureLog(): {
  log: Logger;
  lines: LogLine[];
  /** the same lines as written (JSON text), e.g. to see duplicate keys that parsing hides */
  raw: string[];
  /** resolves with the first line (past or future) for which `match` is true */
  waitFor: (match: (line: LogLine) => boolean) => Promise<LogLine>;
} {
  const lines: LogLine[] = [];
  const raw: string[] = [];
  const waiters: Array<{ match: (line: LogLine) => boolean; resolve: (line: LogLine) => void }> = [];
  const write = (text: string) => {
    const line = JSON.parse(text) as LogLine;
    raw.push(text);
    lines.push(line);
    for (const w of waiters.filter((w) => w.match(line))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(line);
    }
  };
  return {
    log: pino({ level: 'debug' }, { write }),
    lines,
    raw,
    waitFor: (match) =>
      new Promise((resolve) => {
        const found = lines.find(match);
        if (found) resolve(found);
        else waiters.push({ match, resolve });
      }),
  };
}

/** Short waits so tests exercise retries quickly; behaviour is the same as with the defaults. */
export const FAST_RETRY = { baseMs: 20, maxMs: 250 };

export const COORDINATOR_OPTIONS = {
  pollTimeoutSeconds: 1,
  heartbeatIntervalSeconds: 1,
  heartbeatTimeoutSeconds: 5,
  logLevel: 'silent',
} as const;

export type RunningCoordinator = Awaited<ReturnType<typeof startCoordinator>>;

/** A coordinator on a free port, closed after the test; `client` talks to it. */
export async function coordinator(
  t: TestContext,
  options: Partial<Parameters<typeof startCoordinator>[0]> = {},
  deps?: Parameters<typeof startCoordinator>[1],
): Promise<{ c: RunningCoordinator; client: AgentqClient }> {
  const c = await startCoordinator({ ...COORDINATOR_OPTIONS, ...options }, deps);
  const client = new AgentqClient({ url: c.url });
  // on a SQLite file in the test's directory, it must close before the directory goes
  trackRunning(t, () => c.close().catch(() => {}));
  t.after(async () => {
    // the server first: closing it answers parked waits, so a request a failed test left
    // waiting cannot hold the client's close (and the test file) until its hold runs out
    await c.close().catch(() => {});
    await client.close();
  });
  return { c, client };
}

/**
 * `c`, a coordinator the test started itself, closed when the test ends (before its temporary
 * directories go, as coordinator()'s); the test may close it itself before.
 */
export function closeAfter(t: TestContext, c: RunningCoordinator): RunningCoordinator {
  trackRunning(t, () => c.close().catch(() => {}));
  t.after(() => c.close().catch(() => {}));
  return c;
}

/**
 * The coordinator back on `port`, which the test's previous one has just given up (a restart),
 * closed when the test ends. While the port was free another process may have taken it for a
 * moment (an outgoing connection's local port comes from the range port 0 does, or a test file
 * running beside this one listened on port 0): EADDRINUSE is tried again (onPortAgain). `onBusy`
 * is told of each refusal.
 */
export async function coordinatorAgain(
  t: TestContext,
  port: number,
  options: Partial<Parameters<typeof startCoordinator>[0]> = {},
  deps?: Parameters<typeof startCoordinator>[1],
  onBusy?: () => void,
): Promise<RunningCoordinator> {
  return onPortAgain(port, async () => closeAfter(t, await startCoordinator({ ...COORDINATOR_OPTIONS, ...options, port }, deps)), onBusy);
}

/**
 * A temporary directory, removed when the test ends: after the launchers and coordinators the test
 * runs (trackRunning) have stopped, since a launcher of the test may still write its state there.
 */
export const tempDir = (t: TestContext): string => tempDirOf(t, 'agentq-launcher-test-');

export function testConfig(url: string, overrides: Partial<LauncherConfig> = {}): LauncherConfig {
  return {
    url,
    executor: resolveExecutor(fixture('executor.js'), process.cwd()),
    maxJobs: 4,
    projectDir: realpathSync(tmpdir()),
    stopOnExit: false,
    shutdownGraceMs: 10_000,
    killGraceMs: 500,
    passEnv: [],
    logLevel: 'silent',
    hostname: 'test-host',
    projectRoots: [realpathSync(tmpdir())],
    labels: {},
    stateDir: join(tmpdir(), 'agentq-launcher-test-state'),
    portableSessions: undefined,
    idleTimeoutMs: 1_800_000,
    exitGraceMs: 10_000,
    ...overrides,
  };
}

/** An in-process launcher (real executor child processes), force-stopped after the test. */
export async function launcher(
  t: TestContext,
  url: string,
  overrides: Partial<LauncherConfig> = {},
  deps: Partial<LauncherDeps> = {},
): Promise<{ launcher: Launcher; id: string; done: Promise<unknown> }> {
  // each launcher under test has its own state directory (removed once it has stopped) unless
  // the test shares one on purpose
  const ownState = overrides.stateDir === undefined ? mkdtempSync(join(tmpdir(), 'agentq-launcher-state-')) : undefined;
  const config = testConfig(url, { ...(ownState ? { stateDir: ownState } : {}), ...overrides });
  if (overrides.projectRoots && !overrides.projectDir) config.projectDir = overrides.projectRoots[0]!;
  const l = new Launcher(config, { log: testLog(), retry: FAST_RETRY, ...deps });
  const done = l.run().catch((err: unknown) => err);
  const end = async () => {
    l.forceKill();
    await done;
  };
  trackRunning(t, end);
  t.after(async () => {
    await end();
    if (ownState) rmSync(ownState, { recursive: true, force: true, maxRetries: 5 });
  });
  const id = await l.registered;
  return { launcher: l, id, done };
}

/** The test executor's prompt: a script of steps (see fixtures/executor.ts). */
export function script(steps: unknown[], control?: ControlServer): string {
  return JSON.stringify({ control: control?.port, steps });
}

export interface Hello {
  job_id: string;
  pid: number;
  env: Record<string, string>;
  cwd: string;
  /** the `sleep` a `daemon` step before the hello started (outside the executor's group) */
  daemon_pid?: number;
  /** let the executor past its next `await` step */
  release(): void;
  /** resolves when the executor's connection closes (it exited or ended the script) */
  closed: Promise<void>;
}

export interface ControlServer {
  port: number;
  /** the next executor that said hello (in arrival order) */
  next(): Promise<Hello>;
  /** executors connected right now */
  readonly connected: number;
  /** the most executors connected at the same time so far */
  readonly maxConnected: number;
}

/** A TCP server test executors report to and wait on: tests await events instead of sleeping. */
export async function controlServer(t: TestContext): Promise<ControlServer> {
  const arrived: Hello[] = [];
  const waiting: Array<(h: Hello) => void> = [];
  const sockets = new Set<Socket>();
  let connected = 0;
  let maxConnected = 0;
  const server = createServer((socket) => {
    sockets.add(socket);
    connected++;
    maxConnected = Math.max(maxConnected, connected);
    const closed = new Promise<void>((resolve) =>
      socket.once('close', () => {
        connected--;
        sockets.delete(socket);
        resolve();
      }),
    );
    socket.on('error', () => {});
    let buffer = '';
    socket.on('data', (chunk) => {
      buffer += chunk.toString('utf8');
      const nl = buffer.indexOf('\n');
      if (nl < 0 || buffer === '') return;
      const line = buffer.slice(0, nl);
      buffer = '\u0000'; // one hello per connection
      const info = JSON.parse(line) as Omit<Hello, 'release' | 'closed'>;
      const hello: Hello = { ...info, release: () => socket.write('go\n'), closed };
      const w = waiting.shift();
      if (w) w(hello);
      else arrived.push(hello);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    port: (server.address() as { port: number }).port,
    next: () => new Promise<Hello>((resolve) => (arrived.length ? resolve(arrived.shift()!) : waiting.push(resolve))),
    get connected() {
      return connected;
    },
    get maxConnected() {
      return maxConnected;
    },
  };
}

/** Wait (on the coordinator, not with sleeps) until the job is terminal (no bound of its own: jobEnd). */
export const settled: (client: AgentqClient, jobId: string) => Promise<Job> = jobEnd;

/** The job's whole output as stored by the coordinator. */
export async function outputOf(client: AgentqClient, jobId: string): Promise<string> {
  return (await client.getOutput(jobId, { offset: 0 })).output;
}

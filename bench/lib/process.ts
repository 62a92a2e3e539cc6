import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The coordinator's command, as `npm run coordinator` runs it (from bench/dist/lib, after the
 * build). BENCH_COORDINATOR names another build's main.js: the same workload on an older checkout.
 */
const MAIN = process.env.BENCH_COORDINATOR || fileURLToPath(new URL('../../../apps/coordinator/dist/src/main.js', import.meta.url));

export interface ServerProcess {
  url: string;
  pid: number;
  /** resident set size now (Linux: /proc/<pid>/status) */
  rssBytes(): number;
  /** CPU time used so far, user + system, in milliseconds (Linux: /proc/<pid>/stat) */
  cpuMs(): number;
  /** what the process has written to its log so far (the coordinator; empty for redis) */
  log(): string;
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (bind port 0, note it, close). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1];
  if (kb === undefined) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(kb) * 1024;
}

/** VmRSS and VmHWM (peak) of a process, in bytes. */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(/^\S+:\s+(\d+)/.exec(status.split('\n').find((l) => l.startsWith(key)) ?? '')?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS:'), peak: kb('VmHWM:') };
}

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ: 100 on Linux). */
const TICKS_PER_SECOND = 100;

/**
 * CPU time of a process so far (user + system), in ms. Unlike wall time it hardly moves when
 * other work shares the machine, so it is the better measure of what a change costs or saves.
 */
export function cpuOf(pid: number): number {
  const { user, system } = cpuSplitOf(pid);
  return user + system;
}

/** User and system CPU time of a process so far, in ms (system: the kernel's work for it, its socket writes included). */
export function cpuSplitOf(pid: number): { user: number; system: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // fields after the command name (which may contain spaces) in parentheses
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: (Number(fields[11]) * 1000) / TICKS_PER_SECOND, system: (Number(fields[12]) * 1000) / TICKS_PER_SECOND };
}

async function untilAnswers(url: string, child: ChildProcess, log: string): Promise<void> {
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`the process exited (${child.exitCode}); its log:\n${readFileSync(log, 'utf8').slice(-2000)}`);
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    if (i > 500) throw new Error(`${url} did not answer within 10 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The real coordinator (`apps/coordinator/dist/src/main.js`) in its own process, configured by
 * environment variables as a user would, its log written to a file as a deployment would (at the
 * default level, info, unless `env.LOG_LEVEL` says otherwise). BENCH_NODE_ARGS adds node flags
 * (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to see where the coordinator spends its time).
 */
export async function startCoordinatorProcess(databaseUrl: string, env: Record<string, string> = {}, extraNodeArgs: readonly string[] = []): Promise<ServerProcess> {
  const nodeArgs = [...(process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean), ...extraNodeArgs];
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'agentq-bench-'));
  const log = join(dir, 'coordinator.log');
  const fd = openSync(log, 'w');
  const child = spawn(process.execPath, [...nodeArgs, MAIN], {
    stdio: ['ignore', fd, fd],
    env: { ...process.env, HOST: '127.0.0.1', PORT: String(port), DATABASE_URL: databaseUrl, ...env },
  });
  closeSync(fd);
  const url = `http://127.0.0.1:${port}`;
  await untilAnswers(`${url}/health`, child, log);
  const handle = processHandle(child, url, () => readFileSync(log, 'utf8'));
  return { ...handle, stop: () => handle.stop().then(() => rmSync(dir, { recursive: true, force: true })) };
}

/** A benchmark's server process: its measures, and a stop (SIGTERM, then wait for the exit). */
function processHandle(child: ChildProcess, url: string, log: () => string = () => ''): ServerProcess {
  return {
    url,
    pid: child.pid!,
    rssBytes: () => rssOf(child.pid!),
    cpuMs: () => cpuOf(child.pid!),
    log,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
    },
  };
}

/**
 * The set-up the routing, history, dispatch and cluster benches were measured with (that of
 * `startCoordinator`): no log writes inside the timings, polls held as long as the benches'
 * launchers ask (60 s), and no overload 503s, which would time the refusals instead of the work.
 */
export const QUIET_ENV: Readonly<Record<string, string>> = {
  LOG_LEVEL: 'silent',
  LAUNCHER_POLL_TIMEOUT: '60',
  EVENT_REPLAY_SIZE: '1000',
  OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
};

/** redis-server in its own process, in memory only (no RDB, no AOF), or null when it is not installed. */
export async function startRedis(): Promise<(ServerProcess & { port: number }) | null> {
  const port = await freePort();
  let child: ChildProcess;
  try {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await Promise.race([once(child, 'spawn'), once(child, 'error').then(([err]) => Promise.reject(err as Error))]);
  } catch {
    return null;
  }
  const lines: string[] = [];
  child.stdout!.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: string) => {
      lines.push(chunk);
      if (/Ready to accept connections/.test(lines.join(''))) resolve();
    });
    child.once('exit', (code) => reject(new Error(`redis-server exited (${code}):\n${lines.join('')}`)));
  });
  child.stdout!.resume();
  return { ...processHandle(child, `redis://127.0.0.1:${port}`), port };
}

/** bench/raw-server.ts in its own process: a bare node:http server that parks every request. */
export async function startRawServer(): Promise<ServerProcess> {
  return startFloorServer('raw-server.js', {});
}

/**
 * bench/fastify-floor-server.ts in its own process: a bare Fastify app that parks every request,
 * without a logger or (`logged`) with pino at `info` writing to a file of its own, as the
 * coordinator logs.
 */
export async function startFastifyFloorServer(logged: boolean): Promise<ServerProcess> {
  if (!logged) return startFloorServer('fastify-floor-server.js', {});
  const dir = mkdtempSync(join(tmpdir(), 'agentq-bench-floor-'));
  const server = await startFloorServer('fastify-floor-server.js', { FLOOR_LOG: join(dir, 'floor.log') });
  return { ...server, stop: () => server.stop().then(() => rmSync(dir, { recursive: true, force: true })) };
}

/** One of the bench's floor servers (a script beside this folder that prints its port) in its own process. */
async function startFloorServer(script: string, env: Record<string, string>): Promise<ServerProcess> {
  const child = spawn(process.execPath, [fileURLToPath(new URL(`../${script}`, import.meta.url))], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  });
  child.stdout!.setEncoding('utf8');
  const [line] = (await once(child.stdout!, 'data')) as [string];
  const port = Number(line.trim());
  return processHandle(child, `http://127.0.0.1:${port}`);
}

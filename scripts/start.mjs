#!/usr/bin/env node
// `npm start`: the coordinator and one local launcher (demo executor) in one command, for a
// first look at the whole loop. Prints where the API is and a curl line to create a job.
// Ctrl+C shuts both down cleanly: the launcher first (it drains and deregisters), then the
// coordinator. A second Ctrl+C forces both to exit.
//
// Environment: PORT (default 8765) and HOST (default 127.0.0.1) for the coordinator;
// AGENTQ_EXECUTOR to run another executor (e.g. claude-code); LOG_FORMAT=json for raw pino logs.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const COORDINATOR = `${root}apps/coordinator/dist/src/main.js`;
const LAUNCHER = `${root}apps/launcher/dist/src/main.js`;
const host = process.env.HOST || '127.0.0.1';
const port = process.env.PORT || '8765';
const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
const rawLogs = process.env.LOG_FORMAT === 'json';

for (const file of [COORDINATOR, LAUNCHER]) {
  if (!existsSync(file)) {
    console.error(`${file} is missing: run \`npm run build\` first (npm start does it for you)`);
    process.exit(1);
  }
}

const LEVELS = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };
const SKIP = new Set(['level', 'time', 'pid', 'hostname', 'name', 'service', 'msg', 'reqId', 'req', 'res', 'responseTime']);
/** Per-request access logs drown the story of the jobs; LOG_FORMAT=json shows everything. */
const QUIET = new Set(['incoming request', 'request completed']);

/** One pino JSON line as `HH:MM:SS [who] level message key=value ...`, or null to skip it. */
function pretty(who, line) {
  if (rawLogs) return `[${who}] ${line}`;
  let o;
  try {
    o = JSON.parse(line);
  } catch {
    return `[${who}] ${line}`;
  }
  if (QUIET.has(o.msg)) return null;
  const time = new Date(o.time ?? Date.now()).toISOString().slice(11, 19);
  const fields = Object.entries(o)
    .filter(([k]) => !SKIP.has(k))
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  return `${time} [${who}] ${(LEVELS[o.level] ?? o.level).padEnd(5)} ${o.msg ?? ''}${fields ? `  ${fields}` : ''}`;
}

const children = new Map();

/** Start a child in its own process group (so Ctrl+C reaches only us) and prefix its logs. */
function run(who, script, args, env) {
  const child = spawn(process.execPath, [script, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on('line', (line) => {
      const text = pretty(who, line);
      if (text !== null) console.log(text);
    });
  }
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  children.set(who, { child, exited });
  exited.then(({ code, signal }) => {
    children.delete(who);
    if (!stopping) {
      console.error(`${who} exited unexpectedly (${signal ?? `code ${code}`}); stopping`);
      void stop(1);
    }
  });
  return { child, exited };
}

let stopping = false;
let forced = false;

/** Launcher first (it drains its jobs and deregisters), then the coordinator. */
async function stop(code) {
  if (stopping) return;
  stopping = true;
  const launcher = children.get('launcher');
  if (launcher) {
    console.log('stopping the launcher (Ctrl+C again to force)...');
    launcher.child.kill('SIGTERM');
    await launcher.exited;
  }
  const coordinator = children.get('coordinator');
  if (coordinator) {
    coordinator.child.kill('SIGTERM');
    await coordinator.exited;
  }
  process.exit(forced ? 1 : code);
}

process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
function onSignal() {
  if (!stopping) return void stop(0);
  // second signal: the launcher forces its own exit on a second signal, the coordinator too
  forced = true;
  for (const { child } of children.values()) child.kill('SIGTERM');
}
// if this script dies some other way, do not leave the children running
process.on('exit', () => {
  for (const { child } of children.values()) {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

run('coordinator', COORDINATOR, [], { HOST: host, PORT: port });

// wait until the coordinator answers /health
for (let i = 0; ; i++) {
  if (stopping) await new Promise(() => {});
  try {
    const res = await fetch(`${url}/health`);
    if (res.ok) break;
  } catch {
    // not listening yet
  }
  if (i === 100) {
    console.error(`the coordinator did not answer ${url}/health within 10 s; stopping`);
    await stop(1);
  }
  await new Promise((r) => setTimeout(r, 100));
}

run('launcher', LAUNCHER, ['--url', url, '--executor', process.env.AGENTQ_EXECUTOR || 'demo', '--max-jobs', '2'], {});

const body = JSON.stringify({ type: 'start_session', session_name: 'hello', prompt: 'Say hi' });
console.log(`
  agentq is running
    dashboard    ${url}/
    API          ${url}   (OpenAPI: ${url}/openapi.json)
    launcher     1 local launcher, ${process.env.AGENTQ_EXECUTOR || 'demo'} executor

  Create a job, then wait for its result:
    curl -s -X POST ${url}/jobs -H 'content-type: application/json' -d '${body}'
    curl -s '${url}/jobs/<job_id>/wait?timeout_ms=30000'

  Ctrl+C stops both.
`);

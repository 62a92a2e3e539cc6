#!/usr/bin/env node
// `npm start`: the coordinator and one local launcher (demo executor) in one command, for a
// first look at the whole loop. Prints where the API is and how to create a job.
// Ctrl+C shuts both down cleanly: the launcher first (it drains and deregisters), then the
// coordinator. A second Ctrl+C forces both to exit.
//
// Environment: PORT (default 8765; 0 picks a free port) and HOST (default 127.0.0.1) for the
// coordinator; AGENTQ_EXECUTOR to run another executor (e.g. claude-code) and AGENTQ_MAX_JOBS
// how many jobs at once (default 2); LOG_LEVEL to show less or more; LOG_FORMAT=json for the raw
// pino lines; NO_COLOR for plain text on a terminal.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { prettyFactory } from 'pino-pretty';

const root = fileURLToPath(new URL('..', import.meta.url));
const COORDINATOR = `${root}apps/coordinator/dist/src/main.js`;
const LAUNCHER = `${root}apps/launcher/dist/src/main.js`;
const host = process.env.HOST || '127.0.0.1';
const port = process.env.PORT || '8765';
const rawLogs = process.env.LOG_FORMAT === 'json';
const executor = process.env.AGENTQ_EXECUTOR || 'demo';
const DEFAULT_URL = 'http://127.0.0.1:8765';
/**
 * The session name of the banner's curl example: new on every run, since state persists across
 * restarts (DATABASE_URL, by default ./data/agentq.db) and session names are unique. The README's
 * CLI quick start uses `hello`.
 */
const BANNER_SESSION = `hello-curl-${Date.now().toString(36)}`;
/** How long the coordinator may take to say it is listening before we give up. */
const READY_TIMEOUT_MS = 30_000;

for (const file of [COORDINATOR, LAUNCHER]) {
  if (!existsSync(file)) {
    console.error(`${file} is missing: run \`npm run build\` first (npm start does it for you)`);
    process.exit(1);
  }
}

/*
 * Logs. The children always log at info or finer, because the coordinator's `coordinator ready`
 * line (info) is how we learn that *our* coordinator listens, and on which port; lines below
 * the level the user asked for are dropped here instead.
 */
const LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity };
const shownLevel = LEVELS[process.env.LOG_LEVEL ?? 'info'] ?? LEVELS.info;
const childLevel = shownLevel < LEVELS.info ? process.env.LOG_LEVEL : 'info';
/** Per-request access logs drown the story of the jobs; LOG_FORMAT=json shows everything. */
const QUIET = new Set(['incoming request', 'request completed']);
const prettify = prettyFactory({
  colorize: Boolean(process.stdout.isTTY) && !process.env.NO_COLOR,
  translateTime: 'HH:MM:ss',
  ignore: 'pid,hostname,name,service,reqId',
  singleLine: true,
});

/** One child's line for the terminal, or null to drop it. */
function show(who, line, entry) {
  if (rawLogs) return `[${who}] ${line}`;
  if (!entry) return `[${who}] ${line}`;
  if (QUIET.has(entry.msg) || (entry.level ?? LEVELS.info) < shownLevel) return null;
  // a port in use is explained in plain words below; its stack trace would only bury that
  if (entry.msg === 'could not listen' && entry.err?.code === 'EADDRINUSE') return null;
  return `[${who}] ${prettify(entry).trimEnd()}`;
}

function parse(line) {
  try {
    const o = JSON.parse(line);
    return typeof o === 'object' && o !== null ? o : undefined;
  } catch {
    return undefined;
  }
}

const children = new Map();
/** until our coordinator is ready, its exit is explained by coordinatorReady() */
let starting = true;
let stopping = false;
let forced = false;

/** Start a child in its own process group (so Ctrl+C reaches only us) and relay its logs. */
function run(who, script, args, env, onEntry) {
  const child = spawn(process.execPath, [script, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on('line', (line) => {
      const entry = parse(line);
      if (entry) onEntry?.(entry);
      const text = show(who, line, entry);
      if (text !== null) console.log(text);
    });
  }
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  children.set(who, { child, exited });
  exited.then(({ code, signal }) => {
    children.delete(who);
    if (!stopping && !starting) {
      console.error(`${who} exited unexpectedly (${signal ?? `code ${code}`}); stopping`);
      void stop(1);
    }
  });
  return { child, exited };
}

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
// a closed terminal sends SIGHUP; its default would end this script without its 'exit' handler,
// and the children, in sessions of their own, would not get it
process.on('SIGHUP', onSignal);
/*
 * `npm start` runs this script under a shell (npm → sh → node): a SIGTERM sent to npm is passed
 * on to that shell, which dies of it without passing it on, and this script would run on with its
 * children. No event tells a process that its parent is gone; its parent's id changes (to init's,
 * or a subreaper's), which is looked at once a second. Only when npm runs it: `nohup node
 * scripts/start.mjs &` is meant to outlive the shell that started it.
 */
if (process.env.npm_lifecycle_event) {
  const parentPid = process.ppid;
  const parentWatch = setInterval(() => {
    if (process.ppid === parentPid) return;
    clearInterval(parentWatch);
    if (!stopping) console.error(`the process that ran npm start's script (pid ${parentPid}) is gone; stopping`);
    void stop(0);
  }, 1000);
  parentWatch.unref();
}
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

/**
 * Wait for our own coordinator to say it listens. Asking `/health` is not enough: with the
 * port taken by another server, that server would answer and the launcher would attach to it.
 */
function coordinatorReady() {
  return new Promise((resolve, reject) => {
    let listenError;
    const { exited } = run(
      'coordinator',
      COORDINATOR,
      [],
      { HOST: host, PORT: port, LOG_LEVEL: childLevel },
      (entry) => {
        if (entry.msg === 'coordinator ready' && typeof entry.port === 'number') resolve(entry.port);
        if (entry.msg === 'could not listen') listenError = entry.err;
      },
    );
    exited.then(({ code, signal }) => reject({ listenError, code, signal }));
    setTimeout(() => reject({ timeout: true }), READY_TIMEOUT_MS).unref();
  });
}

function explain(failure) {
  const where = `${host}:${port}`;
  if (failure.timeout) return `the coordinator did not start listening on ${where} within ${READY_TIMEOUT_MS / 1000} s`;
  const e = failure.listenError;
  if (e?.code === 'EADDRINUSE') {
    const other = Number(port) + 1;
    return (
      `port ${port} on ${host} is already in use by another program, so the coordinator cannot listen there.\n` +
      `  Stop that program, or start agentq on another port: PORT=${other} npm start\n` +
      `  (then point the CLI at it: AGENTQ_URL=http://${host}:${other} npx agentq ...)`
    );
  }
  if (e?.message) return `the coordinator could not listen on ${where}: ${e.message}`;
  return `the coordinator exited before it was ready (${failure.signal ?? `code ${failure.code}`})`;
}

let boundPort;
try {
  boundPort = await coordinatorReady();
} catch (failure) {
  stopping = true; // the coordinator is gone or going: no "exited unexpectedly" on top
  console.error(`\nagentq could not start: ${explain(failure)}`);
  const c = children.get('coordinator');
  c?.child.kill('SIGTERM');
  await c?.exited;
  process.exit(1);
}
starting = false;
if (stopping) await new Promise(() => {}); // Ctrl+C while starting: stop() exits

const url = `http://${host.includes(':') ? `[${host}]` : host}:${boundPort}`;
// AGENTQ_MAX_JOBS, like any launcher variable, reaches the launcher (its flag would override it)
run('launcher', LAUNCHER, ['--url', url, '--executor', executor], { AGENTQ_MAX_JOBS: process.env.AGENTQ_MAX_JOBS || '2', AGENTQ_LOG_LEVEL: childLevel });

const body = JSON.stringify({ type: 'start_session', session_name: BANNER_SESSION, prompt: 'Say hi' });
const cli = url === DEFAULT_URL ? 'npx agentq' : `AGENTQ_URL=${url} npx agentq`;
console.log(`
  agentq is running
    dashboard    ${url}/
    API          ${url}   (OpenAPI: ${url}/openapi.json)
    launcher     1 local launcher, ${executor} executor

  From another terminal, with the CLI (see the README):
    ${cli} start hello -p "Say hello" --wait
    ${cli} list --all

  Or with curl: create a job, then wait for its result:
    curl -s -X POST ${url}/jobs -H 'content-type: application/json' -d '${body}'
    curl -s '${url}/jobs/<job_id>/wait?timeout_ms=30000'

  Ctrl+C stops both.
`);

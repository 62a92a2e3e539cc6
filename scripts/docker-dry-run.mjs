#!/usr/bin/env node
// The Docker image's build and start, without a docker engine (`npm run docker:dry-run`): the
// Dockerfile's instructions carried out natively in a scratch folder, then the services of
// docker-compose.yml started from the result on 127.0.0.1, and one job run through them.
//
// - The build context is the tree as .dockerignore leaves it; each stage's WORKDIR is a folder of
//   its own; COPY takes from the context or, with --from, from the named stage's folder.
// - RUN runs the build stage's commands with bash (`npm ci`, the build, `npm prune`); the ones
//   that install system packages (apt-get) or make the image's system folders and users (mkdir,
//   chown of /var/lib/...) are skipped and listed: the machine has its own.
// - Then the runtime folder serves as the image, as docker-compose.yml uses it (its wiring is
//   written out below, not read from the file): the `tokens` service makes tokens, the coordinator
//   runs the image's CMD with its ENV (HOST, PORT and the database path moved into the scratch
//   folder), the HEALTHCHECK command must pass, a launcher with the demo executor takes a job
//   created with the `cli` token, and both stop cleanly on SIGTERM.
// What it cannot check: the base image (Node 24 there, this machine's node here), the toolchain
// the skipped apt-get installs, Docker itself (USER node and --chown are not applied: everything
// runs as the user who runs this), and docker-compose.yml's own wiring.
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { contextFiles, dockerfileStages } from './docker-context.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'agentq-docker-'));
const say = (line) => console.log(`docker-dry-run: ${line}`);
// however it ends, the scratch folder goes
process.on('exit', () => rmSync(scratch, { recursive: true, force: true, maxRetries: 5 }));
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => process.exit(130));
/**
 * The environment a RUN line sees: this machine's PATH (without the node_modules/.bin folders of
 * the npm run that started this), HOME (npm's cache and configuration) and the proxies, and the
 * stage's ENV; not this checkout's npm_* variables or NODE_OPTIONS.
 */
const runEnv = (env) => {
  const keep = ['HOME', 'TMPDIR', 'LANG', 'http_proxy', 'https_proxy', 'no_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY'];
  const base = Object.fromEntries(keep.filter((k) => process.env[k] !== undefined).map((k) => [k, process.env[k]]));
  const path = (process.env.PATH ?? '')
    .split(':')
    .filter((p) => !p.endsWith('node_modules/.bin') && !p.includes('node-gyp-bin'))
    .join(':');
  return { ...base, PATH: path, ...env };
};

// --- the build context ---
const context = join(scratch, 'context');
for (const file of contextFiles(root)) {
  mkdirSync(dirname(join(context, file)), { recursive: true });
  cpSync(join(root, file), join(context, file));
}

// --- better-sqlite3's addon ---
// In a real build, `npm ci` gets the addon prebuilt for the image's Node from GitHub; this machine
// cannot reach GitHub, so it would compile it from source (one to three minutes on two cores).
// When this checkout's own install holds an addon built for this very Node, it is offered to the
// stages as a local prebuild instead: prebuild-install's `local-prebuilds` folder, named in a
// .prebuild-installrc in the scratch folder (above every stage; its upward search finds it, and the
// image does not contain it). prebuild-install loads the addon before it keeps it, and compiles as
// before when there is none or it does not load. `npm run docker:dry-run -- --build-from-source`
// compiles anyway.
const addon = join(root, 'node_modules', 'better-sqlite3');
const builtAddon = join(addon, 'build', 'Release', 'better_sqlite3.node');
if (!process.argv.includes('--build-from-source') && existsSync(builtAddon)) {
  const { version } = JSON.parse(readFileSync(join(addon, 'package.json'), 'utf8'));
  const prebuilds = join(scratch, 'prebuilds');
  mkdirSync(prebuilds);
  // the file name prebuild-install looks for (glibc Linux; on others the name differs and it compiles)
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  execFileSync('tar', ['-czf', join(prebuilds, name), '-C', addon, 'build/Release/better_sqlite3.node']);
  writeFileSync(join(scratch, '.prebuild-installrc'), `local-prebuilds=${prebuilds}\n`);
}

// --- the stages ---
const stages = dockerfileStages(readFileSync(join(root, 'Dockerfile'), 'utf8'));
const folders = new Map(); // stage name -> the folder standing for its WORKDIR
let image; // the last stage: { folder, env, cmd, healthcheck }
for (const stage of stages) {
  const folder = join(scratch, `stage-${stage.name}`);
  mkdirSync(folder, { recursive: true });
  folders.set(stage.name, folder);
  const env = {};
  let cmd = null;
  let healthcheck = null;
  for (const { op, args } of stage.instructions) {
    if (op === 'WORKDIR' && args !== '/app') throw new Error(`WORKDIR ${args}: this dry run knows /app only`);
    if (op === 'ENV') for (const [, k, v] of args.matchAll(/(\w+)=(\S+)/g)) env[k] = v;
    else if (op === 'COPY') copy(args, folder);
    else if (op === 'RUN') run(args, folder, env);
    else if (op === 'CMD') cmd = JSON.parse(args);
    else if (op === 'HEALTHCHECK') healthcheck = JSON.parse(args.slice(args.indexOf('CMD') + 3).trim());
  }
  image = { folder, env, cmd, healthcheck };
}
if (folders.has('build')) {
  const compiled = existsSync(join(folders.get('build'), 'node_modules/better-sqlite3/build/Release/obj.target'));
  say(`better-sqlite3's addon: ${compiled ? 'compiled from source' : "this checkout's, as a prebuilt one"}`);
}

function copy(args, into) {
  const words = args.split(/\s+/);
  const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
  const paths = words.filter((w) => !w.startsWith('--'));
  const dest = paths.pop();
  for (const source of paths) {
    // `/app/x` in another stage is that stage's folder (its WORKDIR is /app)
    const src = from === undefined ? join(context, source) : join(folders.get(from), source.replace(/^\/app\/?/, ''));
    const target = dest.endsWith('/') ? join(into, dest, source.split('/').filter(Boolean).pop()) : join(into, dest);
    cpSync(src, resolve(target), { recursive: true, verbatimSymlinks: true });
  }
}

function run(command, cwd, env) {
  if (/^(apt-get|mkdir -p \/var|chown)/.test(command)) return say(`skipped: RUN ${command.slice(0, 80)}…`);
  say(`RUN ${command}`);
  execFileSync('bash', ['-euo', 'pipefail', '-c', command], { cwd, stdio: 'inherit', env: runEnv(env) });
}

// --- the services, from the image's folder ---
const state = join(scratch, 'state');
// the volumes of docker-compose.yml
for (const volume of ['launcher', 'auth']) mkdirSync(join(state, volume), { recursive: true });
const port = 20000 + Math.floor(Math.random() * 20000);
const url = `http://127.0.0.1:${port}`;
const imageEnv = { ...runEnv(image.env), HOST: '127.0.0.1', PORT: String(port), DATABASE_URL: `sqlite:${join(state, 'agentq.db')}` };
const node = (args, env = imageEnv) => execFileSync(args[0], args.slice(1), { cwd: image.folder, env, encoding: 'utf8' });

// the `tokens` service (docker-compose.yml)
node(['node', 'apps/coordinator/dist/src/bootstrap-tokens.js', join(state, 'auth'), 'admin:admin', 'cli:client', `launcher:launcher=${join(state, 'launcher.token')}`]);
const coordinator = spawn(image.cmd[0], image.cmd.slice(1), {
  cwd: image.folder,
  env: { ...imageEnv, AUTH_TOKENS_FILE: join(state, 'auth', 'tokens'), LOG_LEVEL: 'warn' },
  stdio: 'inherit',
});
let launcher;
try {
  await until(async () => (await fetch(`${url}/health`)).ok);
  node(image.healthcheck);
  say('HEALTHCHECK passed');
  launcher = spawn('node', ['apps/launcher/dist/src/main.js'], {
    cwd: image.folder,
    env: {
      ...runEnv(image.env),
      AGENTQ_URL: url,
      AGENTQ_EXECUTOR: 'demo',
      AGENTQ_MAX_JOBS: '4',
      AGENTQ_STATE_DIR: join(state, 'launcher'),
      AGENTQ_TOKEN_FILE: join(state, 'launcher.token'),
      AGENTQ_LOG_LEVEL: 'warn',
    },
    stdio: 'inherit',
  });
  const token = readFileSync(join(state, 'auth', 'cli.token'), 'utf8').trim();
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const created = await fetch(`${url}/jobs`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ type: 'start_session', session_name: 'docker-dry-run', prompt: 'hello' }),
  });
  if (created.status !== 201) throw new Error(`POST /jobs: ${created.status} ${await created.text()}`);
  const { job_id } = await created.json();
  const job = await (await fetch(`${url}/jobs/${job_id}/wait?timeout_ms=30000`, { headers })).json();
  if (job.status !== 'completed') throw new Error(`job ${job_id} is ${job.status}, not completed`);
  say(`job ${job_id} completed: ${JSON.stringify(job.result)}`);
  const status = node(['node', 'apps/cli/dist/src/main.js', 'status', job_id], { ...imageEnv, AGENTQ_URL: url, AGENTQ_TOKEN: token });
  if (!status.includes('completed')) throw new Error(`agentq status: ${status}`);
} finally {
  for (const child of [launcher, coordinator]) {
    if (!child || child.exitCode !== null) continue;
    child.kill('SIGTERM');
    // a process that does not stop on SIGTERM within a minute fails the run (and is killed)
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    const [code, signal] = await once(child, 'exit');
    clearTimeout(killer);
    if (code !== 0) process.exitCode = 1;
    say(`${child === launcher ? 'launcher' : 'coordinator'} stopped on SIGTERM: ${signal ?? `exit ${code}`}`);
  }
}
say(process.exitCode ? 'FAILED' : 'the image builds and runs (as far as a dry run can tell)');

async function until(check) {
  for (let i = 0; i < 200; i++) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the coordinator did not answer /health within 20 s');
}

import { readFileSync } from 'node:fs';
import { hostname as osHostname } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { coordinatorUrlProblem, readCaFile, splitUrls, withoutCredentials } from '@agentq/client';
import { parseDecimal, type Labels } from '@agentq/protocol';
import { resolveExecutor, type ExecutorSpec } from './executors/index.js';
import { builtinLabels, checkLabels, parseLabels } from './labels.js';
import { resolveProjectRoots } from './project-roots.js';
import { defaultStateDir } from './state-dir.js';

/**
 * Launcher configuration: every option has a flag and an environment variable; the flag wins.
 * Loaded once by `loadConfig(argv, env)`; a bad value throws ConfigError naming the option.
 */
export interface LauncherConfig {
  /** coordinator base URL; several coordinators of one database as a comma list (tried in turn) */
  url: string;
  /** the executor program run for each job */
  executor: ExecutorSpec;
  /** jobs run at the same time */
  maxJobs: number;
  /** where executors run when a job names no project_dir: the first of projectRoots */
  projectDir: string;
  /** on deregistration, stop running jobs instead of letting them finish */
  stopOnExit: boolean;
  /** on SIGTERM/SIGINT, how long running jobs may take to finish before they are killed */
  shutdownGraceMs: number;
  /** between SIGTERM and SIGKILL when an executor's process group is killed */
  killGraceMs: number;
  /** extra environment variables passed through to executors */
  passEnv: string[];
  logLevel: LogLevel;
  /** the name this launcher registers with */
  hostname: string;

  // --- placement and watchdog (issues 9, 11, 12) ---
  /** the directories this launcher serves, as real paths (symlinks and `..` resolved); never empty */
  projectRoots: string[];
  /** labels given with --label / AGENTQ_LABELS (the built-in ones are added at registration) */
  labels: Labels;
  /** where the host identity and the records of running executors live */
  stateDir: string;
  /** whether the executor's sessions may resume on any host; undefined: the executor's default */
  portableSessions: boolean | undefined;
  /** stop an executor that printed nothing for this long (0: never) */
  idleTimeoutMs: number;
  /** after an executor's result, how long it may take to exit before its process group is killed */
  exitGraceMs: number;
  /**
   * The bearer token it registers with (a `launcher`-role token), from AGENTQ_TOKEN or
   * --token-file; undefined for a coordinator without authentication. After registering, the
   * launcher uses the `launcher_token` the coordinator answered. Never logged, never given to
   * executors.
   */
  token?: string | undefined;
  /**
   * The file `token` was read from (--token-file / AGENTQ_TOKEN_FILE), if it was: read again at
   * every registration, so that a launcher registering again (the coordinator lost its state,
   * or marked it stale) uses the token the file holds then, rotated or not.
   */
  tokenFile?: string | undefined;
  /** PEM CA certificate to trust for an https:// coordinator (self-signed deployments) */
  caFile?: string | undefined;
}

/** Environment variables that hold coordinator credentials: never passed to executors. */
export const SECRET_ENV = ['AGENTQ_TOKEN', 'AGENTQ_TOKEN_FILE'] as const;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    /** the flag (and its variable) that was wrong, e.g. `--max-jobs / AGENTQ_MAX_JOBS` */
    readonly option: string,
    message: string,
  ) {
    super(`${option}: ${message}`);
  }
}

type Kind = 'string' | 'boolean' | 'list';
interface OptionSpec {
  flag: string;
  env: string;
  kind: Kind;
  arg?: string;
  def: string;
  help: string;
}

/** Every option, written once: parsing, `--help` and docs/launcher.md follow this table. */
export const OPTIONS = [
  {
    flag: 'url',
    env: 'AGENTQ_URL',
    kind: 'string',
    arg: 'URL[,URL]',
    def: 'http://127.0.0.1:8765',
    help: 'coordinator URL; several coordinators of one database: a comma list, the next used when one is down',
  },
  {
    flag: 'executor',
    env: 'AGENTQ_EXECUTOR',
    kind: 'string',
    arg: 'NAME|PATH',
    def: 'claude-code',
    help: 'executor: claude-code, demo, or the path of a program following the executor contract',
  },
  { flag: 'max-jobs', env: 'AGENTQ_MAX_JOBS', kind: 'string', arg: 'N', def: '4', help: 'jobs run at the same time' },
  {
    flag: 'project-dir',
    env: 'AGENTQ_PROJECT_DIR',
    kind: 'list',
    arg: 'DIR[,DIR]',
    def: 'the current directory',
    help: 'a directory this launcher serves (repeatable); the first is where jobs without project_dir run',
  },
  {
    flag: 'stop-on-exit',
    env: 'AGENTQ_STOP_ON_EXIT',
    kind: 'boolean',
    def: 'false',
    help: 'when deregistered, stop running jobs instead of letting them finish',
  },
  {
    flag: 'shutdown-grace',
    env: 'AGENTQ_SHUTDOWN_GRACE',
    kind: 'string',
    arg: 'SECONDS',
    def: '30',
    help: 'on SIGTERM/SIGINT, time running jobs get to finish before they are killed',
  },
  {
    flag: 'kill-grace',
    env: 'AGENTQ_KILL_GRACE',
    kind: 'string',
    arg: 'SECONDS',
    def: '10',
    help: "time between SIGTERM and SIGKILL when an executor's process group is killed",
  },
  {
    flag: 'pass-env',
    env: 'AGENTQ_PASS_ENV',
    kind: 'list',
    arg: 'NAME[,NAME]',
    def: 'none',
    help: 'extra environment variables passed to executors (repeatable)',
  },
  {
    flag: 'log-level',
    env: 'AGENTQ_LOG_LEVEL',
    kind: 'string',
    arg: 'LEVEL',
    def: 'info',
    help: LOG_LEVELS.join('|'),
  },
  { flag: 'verbose', env: 'AGENTQ_VERBOSE', kind: 'boolean', def: 'false', help: 'same as --log-level debug' },
  {
    flag: 'hostname',
    env: 'AGENTQ_HOSTNAME',
    kind: 'string',
    arg: 'NAME',
    def: "the machine's hostname",
    help: 'name to register with',
  },
  // --- placement and watchdog (issues 9, 11, 12) ---
  {
    flag: 'label',
    env: 'AGENTQ_LABELS',
    kind: 'list',
    arg: 'KEY=VALUE[,KEY=VALUE]',
    def: 'none',
    help: 'a label jobs can require (repeatable); added to hostname, executor, os and arch',
  },
  {
    flag: 'state-dir',
    env: 'AGENTQ_STATE_DIR',
    kind: 'string',
    arg: 'DIR',
    def: '$XDG_STATE_HOME/agentq, else ~/.local/state/agentq',
    help: "where this host's identity and the records of running executors are kept",
  },
  {
    flag: 'portable-sessions',
    env: 'AGENTQ_PORTABLE_SESSIONS',
    kind: 'boolean',
    def: "the executor's (demo: true, claude-code: false, a program: false)",
    help: "the executor's sessions can resume on any host (no session affinity)",
  },
  {
    flag: 'idle-timeout',
    env: 'AGENTQ_IDLE_TIMEOUT',
    kind: 'string',
    arg: 'SECONDS',
    def: '1800',
    help: 'stop an executor that prints nothing for this long and fail its job (0: never)',
  },
  {
    flag: 'exit-grace',
    env: 'AGENTQ_EXIT_GRACE',
    kind: 'string',
    arg: 'SECONDS',
    def: '10',
    help: "after an executor's result, time it gets to exit before its process group is killed",
  },
  {
    flag: 'token-file',
    env: 'AGENTQ_TOKEN_FILE',
    kind: 'string',
    arg: 'FILE',
    def: 'none (or the token itself in AGENTQ_TOKEN)',
    help: 'file holding the launcher-role token to register with (read again at every registration)',
  },
  {
    flag: 'ca-file',
    env: 'AGENTQ_CA_FILE',
    kind: 'string',
    arg: 'FILE',
    def: 'the system CAs',
    help: 'CA certificate (PEM) to trust for an https:// coordinator',
  },
] as const satisfies readonly OptionSpec[];

type Flag = (typeof OPTIONS)[number]['flag'];

export function helpText(): string {
  const rows = OPTIONS.map((o) => {
    const left = `  --${o.flag}${'arg' in o ? ` ${o.arg}` : ''}`;
    return `${left.padEnd(34)}${o.help}\n${''.padEnd(34)}env ${o.env}, default ${o.def}`;
  });
  return [
    'Usage: agentq-launcher [options]',
    '',
    'Runs agent jobs from an agentq coordinator on this machine. Each option can also be set by',
    'its environment variable; the flag wins. A true-or-false option is turned off with --no-<flag>.',
    '',
    'Options:',
    ...rows,
    `${'  -h, --help'.padEnd(34)}show this help`,
    `${'  -V, --version'.padEnd(34)}print the version`,
    '',
    'Authentication: set AGENTQ_TOKEN (or --token-file) to a token with the launcher role; the',
    'launcher registers with it, then uses the credential the coordinator gives it.',
    '',
    'Signals: SIGTERM/SIGINT drain (take no new jobs, let running ones finish within',
    '--shutdown-grace, then kill them and report them failed, deregister, exit 0); a second',
    'signal kills the executors and exits 1 at once.',
    '',
    'Executors die with the launcher, even by SIGKILL: a small reaper process ends their process',
    'groups, and a launcher started later with the same --state-dir ends what is left.',
    '',
  ].join('\n');
}

/** `help: true`: print something and exit, the help or (with `version`) the version. */
export type LoadResult = { help: true; version?: true } | { help: false; config: LauncherConfig };

/** Parse `argv` (without node and script) and `env` into a validated configuration. */
export function loadConfig(
  argv: readonly string[],
  env: Record<string, string | undefined>,
  cwd: string = process.cwd(),
): LoadResult {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
    version: { type: 'boolean', short: 'V' },
  };
  for (const o of OPTIONS) {
    options[o.flag] = { type: o.kind === 'boolean' ? 'boolean' : 'string', multiple: o.kind === 'list' };
  }
  let values: Record<string, string | boolean | Array<string | boolean> | undefined>;
  try {
    // `--no-<flag>` turns a boolean off, over its variable (`--no-stop-on-exit` with AGENTQ_STOP_ON_EXIT=true)
    ({ values } = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false, allowNegative: true }));
  } catch (err) {
    throw new ConfigError('arguments', (err as Error).message);
  }
  if (values['help']) return { help: true };
  if (values['version']) return { help: true, version: true };

  /** The raw text of an option: the flag if given, else the variable, else undefined. */
  const raw = (flag: Flag): { text: string; from: string } | undefined => {
    const spec = OPTIONS.find((o) => o.flag === flag)!;
    const v = values[flag];
    if (Array.isArray(v)) return v.length ? { text: v.join(','), from: `--${flag}` } : undefined;
    if (typeof v === 'boolean') return { text: String(v), from: `--${flag}` };
    if (typeof v === 'string') return { text: v, from: `--${flag}` };
    const e = env[spec.env];
    if (e !== undefined && e.trim() !== '') return { text: e.trim(), from: spec.env };
    return undefined;
  };
  const str = (flag: Flag, def: string) => raw(flag)?.text ?? def;
  const bool = (flag: Flag): boolean => {
    const r = raw(flag);
    if (!r) return false;
    const t = r.text.toLowerCase();
    if (['1', 'true', 'yes', 'on'].includes(t)) return true;
    if (['0', 'false', 'no', 'off'].includes(t)) return false;
    throw new ConfigError(r.from, `expected true or false, got ${JSON.stringify(r.text)}`);
  };
  const num = (flag: Flag, def: number, check: (n: number) => boolean, what: string): number => {
    const r = raw(flag);
    if (!r) return def;
    const n = parseDecimal(r.text);
    if (!Number.isFinite(n) || !check(n)) {
      throw new ConfigError(r.from, `expected ${what}, got ${JSON.stringify(r.text)}`);
    }
    return n;
  };

  const urls = splitUrls(str('url', 'http://127.0.0.1:8765'));
  if (urls.length === 0) throw new ConfigError(raw('url')?.from ?? '--url', 'expected an http(s) URL, got nothing');
  const urlFrom = raw('url')?.from ?? '--url';
  for (const url of urls) {
    switch (coordinatorUrlProblem(url)) {
      case 'not_a_url':
      case 'not_http':
        throw new ConfigError(urlFrom, `expected an http(s) URL, got ${JSON.stringify(url)}`);
      case 'credentials':
        throw new ConfigError(
          urlFrom,
          `expected a URL without a user name or password (the token goes in --token-file or AGENTQ_TOKEN), got ${withoutCredentials(url)}`,
        );
      case 'path':
        // a prefix would be dropped, and the pool refuses it
        throw new ConfigError(urlFrom, `expected a URL with no path or query (e.g. http://host:8765), got ${JSON.stringify(url)}`);
    }
  }

  const list = (flag: Flag): string[] =>
    (raw(flag)?.text ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  const attempt = <T>(flag: Flag, fn: () => T): T => {
    try {
      return fn();
    } catch (err) {
      throw new ConfigError(raw(flag)?.from ?? `--${flag}`, (err as Error).message);
    }
  };

  const projectRoots = attempt('project-dir', () => resolveProjectRoots(list('project-dir'), cwd));

  const executorRaw = raw('executor');
  let executor: ExecutorSpec;
  try {
    executor = resolveExecutor(executorRaw?.text ?? 'claude-code', cwd);
  } catch (err) {
    throw new ConfigError(executorRaw?.from ?? '--executor', (err as Error).message);
  }

  const logLevelRaw = raw('log-level');
  let logLevel: LogLevel = bool('verbose') ? 'debug' : 'info';
  if (logLevelRaw) {
    if (!(LOG_LEVELS as readonly string[]).includes(logLevelRaw.text)) {
      throw new ConfigError(logLevelRaw.from, `expected one of ${LOG_LEVELS.join(', ')}, got ${logLevelRaw.text}`);
    }
    // --verbose still wins over a quieter level: it is the flag people reach for when debugging
    if (!bool('verbose')) logLevel = logLevelRaw.text as LogLevel;
  }

  const passEnv = list('pass-env');
  for (const name of passEnv) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw new ConfigError(raw('pass-env')!.from, `not a variable name: ${JSON.stringify(name)}`);
    }
  }

  const hostname = str('hostname', osHostname());
  // sent at registration (at most 255 characters); a long one may still need --label hostname=
  const hostnameRaw = raw('hostname');
  if (hostnameRaw && (hostname.length === 0 || hostname.length > 255 || /\p{Cc}/u.test(hostname))) {
    throw new ConfigError(hostnameRaw.from, `expected a host name of 1 to 255 characters without control characters, got ${JSON.stringify(hostname)}`);
  }
  const labels = attempt('label', () => parseLabels(list('label')));
  attempt('label', () => checkLabels({ ...builtinLabels({ hostname, executor: executor.name }), ...labels }));

  for (const name of passEnv) {
    if ((SECRET_ENV as readonly string[]).includes(name)) {
      throw new ConfigError(raw('pass-env')!.from, `${name} holds the coordinator credential and is never passed to executors`);
    }
  }

  const { token, tokenFile } = readToken(raw('token-file'), env['AGENTQ_TOKEN'], cwd);
  const caRaw = raw('ca-file');
  const caFile = caRaw ? resolve(cwd, caRaw.text) : undefined;
  if (caRaw && caFile) {
    // a file with no certificate in it would be skipped by TLS without a word, and every call
    // refused as "self-signed" (readCaFile)
    try {
      readCaFile(caFile);
    } catch (err) {
      throw new ConfigError(caRaw.from, (err as Error).message);
    }
  }

  const seconds = (n: number) => n >= 0 && n <= 86_400;
  return {
    help: false,
    config: {
      url: urls.join(','),
      executor,
      maxJobs: num('max-jobs', 4, (n) => Number.isInteger(n) && n >= 1 && n <= 1000, 'an integer from 1 to 1000'),
      projectDir: projectRoots[0]!,
      stopOnExit: bool('stop-on-exit'),
      shutdownGraceMs: Math.round(num('shutdown-grace', 30, seconds, 'seconds from 0 to 86400') * 1000),
      killGraceMs: Math.round(num('kill-grace', 10, seconds, 'seconds from 0 to 86400') * 1000),
      passEnv,
      logLevel,
      hostname,
      // --- placement and watchdog (issues 9, 11, 12) ---
      projectRoots,
      labels,
      stateDir: resolve(cwd, str('state-dir', defaultStateDir(env))),
      portableSessions: raw('portable-sessions') ? bool('portable-sessions') : undefined,
      idleTimeoutMs: Math.round(num('idle-timeout', 1800, seconds, 'seconds from 0 to 86400') * 1000),
      exitGraceMs: Math.round(num('exit-grace', 10, seconds, 'seconds from 0 to 86400') * 1000),
      token,
      tokenFile,
      caFile,
    },
  };
}

/** The registration token: --token-file wins over AGENTQ_TOKEN, which wins over AGENTQ_TOKEN_FILE. */
function readToken(
  file: { text: string; from: string } | undefined,
  fromEnv: string | undefined,
  cwd: string,
): { token: string | undefined; tokenFile?: string } {
  const direct = fromEnv?.trim();
  if (file && (file.from.startsWith('--') || !direct)) {
    const path = resolve(cwd, file.text);
    try {
      return { token: readTokenFile(path), tokenFile: path };
    } catch (err) {
      throw new ConfigError(file.from, (err as Error).message);
    }
  }
  return { token: direct || undefined };
}

/** The token a token file holds; throws saying what is wrong with the file. */
export function readTokenFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8').trim();
  } catch (err) {
    throw new Error(`cannot read the token file ${path}: ${(err as Error).message}`);
  }
  if (text === '' || /\s/.test(text)) throw new Error(`${path} must hold the token alone (one line, no spaces)`);
  return text;
}

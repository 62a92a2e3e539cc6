import { MAX_SESSION_LIST_ITEMS, MAX_TIMEOUT_MS, parseDecimal } from '@agentq/protocol';
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { redactDatabaseUrl } from './core/store/database-url.js';
import { explain } from './schema-errors.js';

/**
 * Coordinator configuration. Loaded once by `loadConfig(env)` from environment variables,
 * validated, defaults applied; a bad value throws ConfigError naming the variable.
 */
export const ConfigSchema = Type.Object({
  host: Type.String({ minLength: 1 }),
  port: Type.Integer({ minimum: 0, maximum: 65535 }),
  logLevel: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))),
  /** seconds a launcher poll is held open before 204 */
  pollTimeoutSeconds: Type.Number({ exclusiveMinimum: 0, maximum: 3600 }),
  /** seconds between launcher heartbeats (announced at registration) */
  heartbeatIntervalSeconds: Type.Number({ exclusiveMinimum: 0, maximum: 86400 }),
  /** seconds without heartbeat or poll before a launcher is stale */
  heartbeatTimeoutSeconds: Type.Number({ exclusiveMinimum: 0, maximum: 86400 }),
  /** seconds a claimed job may wait for `started` before it goes back to the queue */
  claimLeaseSeconds: Type.Number({ exclusiveMinimum: 0, maximum: 86400 }),
  /** Claims that end without a start (lease expired, launcher lost) before a job fails `claim_attempts_exhausted`. */
  maxClaims: Type.Integer({ minimum: 1, maximum: 1000 }),
  /** how often the sweeper checks staleness, leases, timeouts and retention */
  sweepIntervalMs: Type.Integer({ minimum: 1, maximum: 600_000 }),
  /**
   * largest accepted prompt, in UTF-8 bytes; at least 4 KiB, or a delivery resume (a child's
   * outcome and the parent's messages) would have no room for a message at all
   */
  maxPromptBytes: Type.Integer({ minimum: 4096, maximum: 64 * 1024 * 1024 }),
  /** default per-job timeout; null = none */
  // at most what a job may ask for itself (timeout_ms of POST /jobs)
  defaultJobTimeoutMs: Type.Union([Type.Integer({ minimum: 1, maximum: MAX_TIMEOUT_MS }), Type.Null()]),
  /** output bytes kept per job (oldest dropped) */
  outputMaxBytes: Type.Integer({ minimum: 1, maximum: 1024 * 1024 * 1024 }),
  /** default size of `GET /jobs/{id}/output` */
  outputPreviewBytes: Type.Integer({ minimum: 1 }),
  /**
   * terminal jobs older than this are deleted (history); JOB_HISTORY_DAYS or JOB_RETENTION_MS.
   * At most 2^53 - 1: the sweeper's cut-off (now minus this) must stay an exact integer, or
   * PostgreSQL refuses it as a bigint ("-1e+23") and every sweep fails from then on
   */
  jobRetentionMs: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
  /** SSE events kept for Last-Event-ID replay */
  eventReplaySize: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
  /** what the replayed events may hold, roughly (their prompts, results, queued outcomes) */
  eventReplayBytes: Type.Integer({ minimum: 0, maximum: 64 * 1024 * 1024 * 1024 }),
  /** where state lives: `sqlite:<path>` (default), `memory:`, or `postgres://…` */
  databaseUrl: Type.String({ minLength: 1 }),
  /** PostgreSQL: connections in this coordinator's pool */
  databasePoolSize: Type.Integer({ minimum: 1, maximum: 1000 }),
  /** PostgreSQL: ms a new connection may take to open, and a change may wait for a free one of the pool */
  databaseConnectTimeoutMs: Type.Integer({ minimum: 1, maximum: 600_000 }),
  /** PostgreSQL: ms a statement on a pooled connection may go unanswered before the request is 503 and the connection dropped */
  databaseQueryTimeoutMs: Type.Integer({ minimum: 1, maximum: 3_600_000 }),
  /** a ready job no online launcher can take fails after this many seconds; 0 = wait for ever */
  scheduleTimeoutSeconds: Type.Number({ minimum: 0, maximum: 30 * 86400 }),
  /** terminal jobs kept in memory by the durable stores (the rest is read from the database) */
  hotJobs: Type.Integer({ minimum: 0, maximum: 10_000_000 }),
  /** idle sessions kept in memory by the durable stores */
  hotSessions: Type.Integer({ minimum: 0, maximum: 10_000_000 }),
  // --- security (see docs/operations.md) ---
  /** `NAME ROLE SHA256HEX` lines; set = authentication on; re-read on SIGHUP */
  authTokensFile: Type.Union([Type.String({ minLength: 1 }), Type.Null()]),
  /** run open (no tokens) on a non-loopback address: an explicit, logged choice */
  authDisabled: Type.Boolean(),
  /** PEM certificate chain and key: both set = HTTPS */
  tlsCertFile: Type.Union([Type.String({ minLength: 1 }), Type.Null()]),
  tlsKeyFile: Type.Union([Type.String({ minLength: 1 }), Type.Null()]),
  /** answer 503 while the event loop's mean delay is above this (0 = never) */
  overloadMaxEventLoopDelayMs: Type.Integer({ minimum: 0, maximum: 600_000 }),
  /** answer 503 while the V8 heap in use is above this many bytes (0 = never; null = 90% of the heap limit) */
  overloadMaxHeapBytes: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
  /** the Retry-After of an overload 503, in seconds */
  overloadRetryAfterSeconds: Type.Integer({ minimum: 1, maximum: 3600 }),
  /** how often load is measured (no variable: tests make it short) */
  overloadSampleIntervalMs: Type.Integer({ minimum: 10, maximum: 60_000 }),
  /** `POST /jobs` (and `/jobs/batch`) requests per minute per token; 0 = no limit */
  jobsRateLimitPerMinute: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
  // --- limits and timeouts (docs/operations.md, "Limits and timeouts") ---
  /** UTF-8 bytes of prompts that pending jobs may hold; beyond it job creation is 503 queue_full (null = a quarter of the heap limit) */
  maxQueuedBytes: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]),
  /** characters of prompts, results and errors one list page, `POST /jobs/wait` answer or poll answer carries; past it a page ends early, a wait answer lists the rest in `omitted`, a poll hands out fewer jobs (always at least one item) */
  maxAnswerBytes: Type.Integer({ minimum: 1024, maximum: 1024 * 1024 * 1024 }),
  /** characters of prompts, results and errors all such answers in flight carry together; past it pages shrink, then a list is 503 overloaded (null = a sixteenth of the heap limit) */
  maxAnswerBytesInFlight: Type.Union([Type.Integer({ minimum: 1024 }), Type.Null()]),
  /** entries of `job_ids` and of `children` a session object carries at most (the newest); the rest are paged by GET /jobs?session_name= and GET /sessions?parent= */
  maxSessionListItems: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
  /** open `GET /events` streams; one more is 503 too_many_clients */
  maxSseClients: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
  /** launchers registered (online, stale or deregistering); past it the oldest stale one is forgotten, or a registration is 503 too_many_launchers */
  maxLaunchers: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
  /** bytes buffered for all event-stream clients together; beyond it the slowest are cut first */
  sseMaxBufferedBytes: Type.Integer({ minimum: 64 * 1024, maximum: 64 * 1024 * 1024 * 1024 }),
  /** open TCP connections served normally (null = derived from the open-file limit) */
  maxConnections: Type.Union([Type.Integer({ minimum: 1, maximum: 10_000_000 }), Type.Null()]),
  /** connections beyond maxConnections that may still call /health, /metrics and the launcher routes */
  connectionReserve: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
  /** open connections per client address (0 = no per-address limit) */
  maxConnectionsPerAddress: Type.Integer({ minimum: 0, maximum: 10_000_000 }),
  /** ms to receive a whole request (headers and body) */
  httpRequestTimeoutMs: Type.Integer({ minimum: 1, maximum: 3_600_000 }),
  /** ms to receive a request's headers */
  httpHeadersTimeoutMs: Type.Integer({ minimum: 1, maximum: 3_600_000 }),
  /** ms a connection may stay silent (no request, or a request with nothing sent back); waits get their hold on top */
  httpIdleTimeoutMs: Type.Integer({ minimum: 1, maximum: 3_600_000 }),
  /** ms a kept-alive connection waits for its next request */
  httpKeepAliveTimeoutMs: Type.Integer({ minimum: 1, maximum: 3_600_000 }),
  /** log bytes held in memory while stdout is slow; lines beyond are dropped and counted */
  logBufferBytes: Type.Integer({ minimum: 1024, maximum: 1024 * 1024 * 1024 }),
  /**
   * how far V8 lets the heap grow past what the last full collection kept, in percent (V8's
   * --heap-growing-percent); 0 = V8's own choice, which trades memory for speed. Process-wide:
   * applied by the coordinator program (main.ts), not by buildApp.
   */
  heapGrowthPercent: Type.Integer({ minimum: 0, maximum: 1000 }),
});
export type CoordinatorConfig = Static<typeof ConfigSchema>;

const DAY_MS = 24 * 60 * 60 * 1000;

export const DEFAULT_CONFIG: CoordinatorConfig = {
  host: '127.0.0.1',
  port: 8765,
  logLevel: 'info',
  pollTimeoutSeconds: 30,
  heartbeatIntervalSeconds: 60,
  heartbeatTimeoutSeconds: 120,
  claimLeaseSeconds: 60,
  maxClaims: 5,
  sweepIntervalMs: 1000,
  maxPromptBytes: 1024 * 1024,
  defaultJobTimeoutMs: null,
  outputMaxBytes: 1024 * 1024,
  outputPreviewBytes: 16 * 1024,
  jobRetentionMs: 30 * DAY_MS,
  eventReplaySize: 1000,
  eventReplayBytes: 32 * 1024 * 1024,
  databaseUrl: 'sqlite:./data/agentq.db',
  databasePoolSize: 10,
  databaseConnectTimeoutMs: 30_000,
  databaseQueryTimeoutMs: 30_000,
  scheduleTimeoutSeconds: 600,
  hotJobs: 1000,
  hotSessions: 10_000,
  authTokensFile: null,
  authDisabled: false,
  tlsCertFile: null,
  tlsKeyFile: null,
  overloadMaxEventLoopDelayMs: 1000,
  overloadMaxHeapBytes: null,
  overloadRetryAfterSeconds: 5,
  overloadSampleIntervalMs: 1000,
  jobsRateLimitPerMinute: 0,
  maxQueuedBytes: null,
  maxAnswerBytes: 8 * 1024 * 1024,
  maxAnswerBytesInFlight: null,
  maxSessionListItems: MAX_SESSION_LIST_ITEMS,
  maxSseClients: 1000,
  // the most online launchers the default connection limit serves (each parks a poll): a fleet that
  // size is not refused; a launcher is ~1 KB, but up to ~56 KB with every label and root at its limit
  maxLaunchers: 10_000,
  sseMaxBufferedBytes: 64 * 1024 * 1024,
  maxConnections: null,
  connectionReserve: 64,
  maxConnectionsPerAddress: 0,
  httpRequestTimeoutMs: 60_000,
  httpHeadersTimeoutMs: 15_000,
  httpIdleTimeoutMs: 75_000,
  httpKeepAliveTimeoutMs: 72_000,
  logBufferBytes: 4 * 1024 * 1024,
  heapGrowthPercent: 20,
};


/** Environment variable -> config key, and how to read it. */
const ENV: ReadonlyArray<[string, keyof CoordinatorConfig, 'string' | 'number' | 'nullable-number' | 'days' | 'boolean']> = [
  ['DATABASE_URL', 'databaseUrl', 'string'],
  ['DATABASE_POOL_SIZE', 'databasePoolSize', 'number'],
  ['DATABASE_CONNECT_TIMEOUT_MS', 'databaseConnectTimeoutMs', 'number'],
  ['DATABASE_QUERY_TIMEOUT_MS', 'databaseQueryTimeoutMs', 'number'],
  ['JOB_HISTORY_DAYS', 'jobRetentionMs', 'days'],
  ['HOST', 'host', 'string'],
  ['PORT', 'port', 'number'],
  ['LOG_LEVEL', 'logLevel', 'string'],
  ['LAUNCHER_POLL_TIMEOUT', 'pollTimeoutSeconds', 'number'],
  ['LAUNCHER_HEARTBEAT_INTERVAL', 'heartbeatIntervalSeconds', 'number'],
  ['LAUNCHER_HEARTBEAT_TIMEOUT', 'heartbeatTimeoutSeconds', 'number'],
  ['JOB_CLAIM_LEASE', 'claimLeaseSeconds', 'number'],
  ['JOB_MAX_CLAIMS', 'maxClaims', 'number'],
  ['SWEEP_INTERVAL_MS', 'sweepIntervalMs', 'number'],
  ['MAX_PROMPT_BYTES', 'maxPromptBytes', 'number'],
  ['JOB_DEFAULT_TIMEOUT_MS', 'defaultJobTimeoutMs', 'nullable-number'],
  ['JOB_OUTPUT_MAX_BYTES', 'outputMaxBytes', 'number'],
  ['JOB_OUTPUT_PREVIEW_BYTES', 'outputPreviewBytes', 'number'],
  ['JOB_RETENTION_MS', 'jobRetentionMs', 'number'],
  ['EVENT_REPLAY_SIZE', 'eventReplaySize', 'number'],
  ['EVENT_REPLAY_BYTES', 'eventReplayBytes', 'number'],
  ['JOB_SCHEDULE_TIMEOUT', 'scheduleTimeoutSeconds', 'number'],
  ['JOB_CACHE_SIZE', 'hotJobs', 'number'],
  ['SESSION_CACHE_SIZE', 'hotSessions', 'number'],
  ['AUTH_TOKENS_FILE', 'authTokensFile', 'string'],
  ['AUTH_DISABLED', 'authDisabled', 'boolean'],
  ['TLS_CERT_FILE', 'tlsCertFile', 'string'],
  ['TLS_KEY_FILE', 'tlsKeyFile', 'string'],
  ['OVERLOAD_MAX_EVENT_LOOP_DELAY_MS', 'overloadMaxEventLoopDelayMs', 'number'],
  ['OVERLOAD_MAX_HEAP_BYTES', 'overloadMaxHeapBytes', 'number'],
  ['OVERLOAD_RETRY_AFTER', 'overloadRetryAfterSeconds', 'number'],
  ['JOBS_RATE_LIMIT_PER_MINUTE', 'jobsRateLimitPerMinute', 'number'],
  ['MAX_QUEUED_BYTES', 'maxQueuedBytes', 'number'],
  ['MAX_ANSWER_BYTES', 'maxAnswerBytes', 'number'],
  ['MAX_ANSWER_BYTES_IN_FLIGHT', 'maxAnswerBytesInFlight', 'number'],
  ['MAX_SESSION_LIST_ITEMS', 'maxSessionListItems', 'number'],
  ['MAX_SSE_CLIENTS', 'maxSseClients', 'number'],
  ['MAX_LAUNCHERS', 'maxLaunchers', 'number'],
  ['SSE_MAX_BUFFERED_BYTES', 'sseMaxBufferedBytes', 'number'],
  ['MAX_CONNECTIONS', 'maxConnections', 'number'],
  ['CONNECTION_RESERVE', 'connectionReserve', 'number'],
  ['MAX_CONNECTIONS_PER_ADDRESS', 'maxConnectionsPerAddress', 'number'],
  ['HTTP_REQUEST_TIMEOUT_MS', 'httpRequestTimeoutMs', 'number'],
  ['HTTP_HEADERS_TIMEOUT_MS', 'httpHeadersTimeoutMs', 'number'],
  ['HTTP_IDLE_TIMEOUT_MS', 'httpIdleTimeoutMs', 'number'],
  ['HTTP_KEEP_ALIVE_TIMEOUT_MS', 'httpKeepAliveTimeoutMs', 'number'],
  ['LOG_BUFFER_BYTES', 'logBufferBytes', 'number'],
  ['HEAP_GROWTH_PERCENT', 'heapGrowthPercent', 'number'],
];
export const CONFIG_ENV_VARS = ENV.map(([name, key]) => ({ name, key }));

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
  }
}

/**
 * The coordinator cannot start for a reason outside its configuration (its database server
 * cannot be reached): said in one line, exit 1, where a bug's error gets its stack trace.
 */
export class StartupError extends Error {
  override readonly name = 'StartupError';
}

/** Read the configuration from `env` (normally process.env), with `overrides` on top. */
export function loadConfig(
  env: Record<string, string | undefined> = {},
  overrides: Partial<CoordinatorConfig> = {},
): CoordinatorConfig {
  const config: Record<string, unknown> = { ...DEFAULT_CONFIG };
  // the variable each key was read from: two variables set one key (JOB_HISTORY_DAYS and
  // JOB_RETENTION_MS), and an error names the one that was given
  const source = new Map<string, string>();
  if (env.STATE_FILE !== undefined && env.STATE_FILE.trim() !== '') {
    throw new ConfigError(
      'STATE_FILE',
      'is no longer supported: state is kept in DATABASE_URL (default sqlite:./data/agentq.db); see docs/operations.md',
    );
  }
  for (const [name, key, kind] of ENV) {
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') continue;
    source.set(key, name);
    if (kind === 'string') config[key] = raw.trim();
    else if (kind === 'boolean') config[key] = parseBoolean(name, raw);
    else if (kind === 'nullable-number' && ['none', 'null', '0'].includes(raw.trim().toLowerCase())) config[key] = null;
    else {
      const n = parseDecimal(raw.trim());
      if (!Number.isFinite(n)) throw new ConfigError(name, `expected a decimal number, got ${JSON.stringify(raw)}`);
      config[key] = kind === 'days' ? Math.round(n * DAY_MS) : n;
    }
  }
  Object.assign(config, overrides);
  for (const error of Value.Errors(ConfigSchema, config)) {
    const { path, message } = explain(error);
    const key = path.replace(/^\//, '');
    const variable = (key in overrides ? undefined : source.get(key)) ?? ENV.find(([, k]) => k === key)?.[0] ?? key;
    throw new ConfigError(variable, `${message} (got ${JSON.stringify(error.value)})`);
  }
  if ((config.tlsCertFile === null) !== (config.tlsKeyFile === null)) {
    throw new ConfigError(config.tlsCertFile === null ? 'TLS_CERT_FILE' : 'TLS_KEY_FILE', 'TLS_CERT_FILE and TLS_KEY_FILE go together');
  }
  if (config.authDisabled === true && config.authTokensFile !== null) {
    throw new ConfigError('AUTH_DISABLED', 'cannot be true while AUTH_TOKENS_FILE is set; unset one of them');
  }
  if (!/^(memory:|sqlite:.+|postgres(ql)?:\/\/.+)$/.test(config.databaseUrl as string)) {
    throw new ConfigError(
      'DATABASE_URL',
      `expected sqlite:<path>, memory: or postgres://…, got ${JSON.stringify(redactDatabaseUrl(config.databaseUrl as string))}`,
    );
  }
  if ((config.httpHeadersTimeoutMs as number) > (config.httpRequestTimeoutMs as number)) {
    throw new ConfigError(
      'HTTP_HEADERS_TIMEOUT_MS',
      `must not be longer than HTTP_REQUEST_TIMEOUT_MS (${String(config.httpRequestTimeoutMs)} ms): a request's headers get no more time than its body`,
    );
  }
  if (config.heartbeatTimeoutSeconds as number <= (config.heartbeatIntervalSeconds as number)) {
    throw new ConfigError(
      'LAUNCHER_HEARTBEAT_TIMEOUT',
      `must be longer than LAUNCHER_HEARTBEAT_INTERVAL (${String(config.heartbeatIntervalSeconds)} s)`,
    );
  }
  return config as CoordinatorConfig;
}

const TRUE = ['true', '1', 'yes', 'on'];
const FALSE = ['false', '0', 'no', 'off'];
function parseBoolean(variable: string, raw: string): boolean {
  const t = raw.trim().toLowerCase();
  if (TRUE.includes(t)) return true;
  if (FALSE.includes(t)) return false;
  throw new ConfigError(variable, `expected true or false, got ${JSON.stringify(raw)}`);
}

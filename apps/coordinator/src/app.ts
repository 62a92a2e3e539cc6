import { readFileSync } from 'node:fs';
import type { Server as HttpsServer } from 'node:https';
import { createSecureContext } from 'node:tls';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { ConfigError, type CoordinatorConfig } from './config.js';
import { systemClock, type Clock } from './core/clock.js';
import { Coordinator } from './core/coordinator.js';
import { CoordinatorError } from './core/errors.js';
import { settledWithin } from './core/within.js';
import { checkExposure, isLoopback } from './exposure.js';
import { agentAuth } from './http/auth/agent-auth.js';
import { StoreLauncherCredentials, type LauncherCredentials } from './http/auth/launcher-credentials.js';
import { installAuth, type Auth } from './http/auth/plugin.js';
import { TokenFileError, TokenStore } from './http/auth/tokens.js';
import { dashboardRoutes, DEFAULT_DASHBOARD_DIR } from './http/dashboard.js';
import { clientErrorHandler, frameworkErrors, installErrorHandling } from './http/errors.js';
import { ConnectionGuard, installConnectionGuard } from './http/connections.js';
import { installHeaderRefusals, NODE_SERVER_OPTIONS } from './http/header-refusals.js';
import { installJsonBodyParser } from './http/json-body.js';
import { eventRoutes } from './http/events.js';
import { jobRoutes } from './http/jobs.js';
import { launcherRoutes } from './http/launcher.js';
import { launchersRoutes } from './http/launchers.js';
import { installRequestMetrics, metricsRoutes, timedFrameworkErrors } from './http/metrics.js';
import { installOpenApi } from './http/openapi.js';
import { installOverloadProtection } from './http/overload.js';
import { installCreationLimit } from './http/creation-limit.js';
import { loggedFrameworkErrors, RequestLog } from './http/request-log.js';
import { sessionRoutes } from './http/sessions.js';
import { SseClients } from './http/sse-clients.js';
import { installTimeouts, sseKeepaliveMs } from './http/timeouts.js';
import { typeboxValidatorCompiler } from './http/validation.js';
import { installRouteOf, routeOf } from './http/route-of.js';
import { resolveLimits } from './limits.js';
import { logLinesDropped, stdoutDestination } from './log-destination.js';
import { CENSOR, PINO_REDACT_PATHS, redactSecrets } from './log-redaction.js';
import { CoordinatorMetrics } from './metrics/metrics.js';
import { coordinatorSource } from './metrics/source.js';

export interface AppDeps {
  /** the domain core; pass one to keep state across app instances (a restart in tests) */
  core?: Coordinator;
  clock?: Clock;
  logger?: Logger;
  /** the built dashboard served at `/` (default: apps/dashboard/dist/public of this repository) */
  dashboardDir?: string;
  /** where launcher credentials live (default: beside each launcher in the store) */
  credentials?: LauncherCredentials;
}

/**
 * The coordinator's logger: to stdout without ever blocking (log-destination.ts: lines that
 * stdout cannot take in time are dropped and counted), or to `destination` (tests read it).
 */
export function createLogger(config: CoordinatorConfig, destination?: DestinationStream): Logger {
  const options: LoggerOptions = {
    level: config.logLevel,
    base: { service: 'agentq-coordinator' },
    // credentials never reach a line (log-redaction.ts): the formatter censors plain data; pino
    // the top-level keys (a child logger's bindings too) and what serializers make of a request
    // or an error. No wildcard path: that would send every value of every line through pino's
    // redaction.
    formatters: { log: redactSecrets },
    redact: { paths: [...PINO_REDACT_PATHS], censor: CENSOR },
  };
  return pino(options, destination ?? stdoutDestination(config.logBufferBytes));
}

/** How long a shutdown waits for a sweep under way before the store is closed under it. */
const SWEEP_DRAIN_MS = 2000;

/**
 * Build the coordinator's Fastify app, not listening (only main.ts and startCoordinator listen).
 * Opens the store named by DATABASE_URL unless a core is passed in. The sweeper (staleness,
 * leases, timeouts, history) runs while the app is ready.
 */
export async function buildApp(config: CoordinatorConfig, deps: AppDeps = {}): Promise<FastifyInstance> {
  // refuse a weak or broken security set-up before touching any state
  checkExposure(config);
  const tokens = loadTokens(config);
  const tls = readTls(config);
  const logger = deps.logger ?? createLogger(config);
  const clock = deps.clock ?? systemClock;
  const ownsCore = deps.core === undefined;
  // recovery (a core of our own) runs once the metrics listen, below
  const core = deps.core ?? (await Coordinator.open(config, { clock, logger, recover: false }));
  const startedAt = clock.now();

  // bodies carry a prompt of up to maxPromptBytes however it is escaped (limits.ts)
  const limits = resolveLimits(config);
  const bodyLimit = limits.bodyLimit;
  const connections = new ConnectionGuard(
    {
      max: limits.maxConnections,
      reserve: config.connectionReserve,
      perAddress: config.maxConnectionsPerAddress,
      retryAfterSeconds: config.overloadRetryAfterSeconds,
    },
    logger,
  );
  const sse = new SseClients({
    maxClients: config.maxSseClients,
    maxBufferedBytes: config.sseMaxBufferedBytes,
    // every job event may carry a prompt (?include=prompt): room for a burst of large ones
    maxUnreadPerClient: Math.max(16 * 1024 * 1024, config.maxPromptBytes * 8),
    retryAfterSeconds: config.overloadRetryAfterSeconds,
  });
  // made before the app: Fastify takes its router-error handler, timed by the metrics, at construction
  const metrics = new CoordinatorMetrics(coordinatorSource(core), {
    sseClients: () => sse.size,
    protection: {
      logLinesDropped,
      ...queuedBytesSource(core.store),
      maxQueuedBytes: core.admission.maxQueuedBytes,
      queueFullRefusals: () => core.admission.refused,
      answers: () => ({ held: core.answers.held, max: core.answers.total, refused: core.answers.refused }),
      connections: () => ({
        open: connections.open,
        refused: connections.refused,
        evicted: connections.evicted,
        requestsRefused: connections.requestsRefused,
      }),
      sse: () => ({ refused: sse.refused, cutUnread: sse.cut.client_unread, cutTotal: sse.cut.total_buffered }),
    },
  });
  // after a restart, recovery requeues claimed jobs and interrupts those of lost launchers: the
  // job metrics see those events (a requeued job's time in queue counts from its requeue)
  if (ownsCore) await core.recover();

  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new RequestLog(), // one line per request; long-polls at debug
    bodyLimit,
    // Node's own refusals (no Host, an unmet Expect) answered in the standard shape (header-refusals.ts)
    ...(tls ? { https: { ...tls, ...NODE_SERVER_OPTIONS } } : { http: NODE_SERVER_OPTIONS }),
    // answered by our own hook below, in the standard error shape
    return503OnClosing: false,
    forceCloseConnections: true,
    // path ids may be up to 200 UTF-16 units (IdParam), each up to 9 characters percent-encoded
    // (%E4%BC%9A): longer ones fail validation, naming the field, and only past this a 400 on the URL
    routerOptions: { maxParamLength: 200 * 9 },
    frameworkErrors: timedFrameworkErrors(metrics, loggedFrameworkErrors(frameworkErrors)),
    clientErrorHandler,
  }).withTypeProvider<TypeBoxTypeProvider>() as unknown as FastifyInstance;

  installRouteOf(app);
  app.setValidatorCompiler(typeboxValidatorCompiler);
  // The API speaks JSON only: other bodies get 415 rather than a confusing type error.
  app.removeContentTypeParser('text/plain');
  // large bodies are parsed on a thread of their own and handled one per turn of the event loop
  installJsonBodyParser(app);
  installErrorHandling(app);
  installHeaderRefusals(app);

  // limits and timeouts (docs/operations.md): connections, event streams, HTTP timeouts
  installTimeouts(app, config);
  installConnectionGuard(app, connections);
  installRequestMetrics(app, metrics);

  // A request on a kept-alive connection while the server closes: 503, try again (elsewhere).
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', (_req, reply, done) => {
    if (!closing) return done();
    reply.header('retry-after', '1');
    throw new CoordinatorError('shutting_down', 'the coordinator is shutting down');
  });

  // An answer may show changes the store has applied but not yet written (SQLite commits the
  // transactions of concurrent requests as a group): it leaves once the open group is settled
  // (Store.settled). Whether that group was written is not this answer's outcome: a request's own
  // changes were settled by its transactions, which fail with 503 storage_unavailable if their
  // group could not be written; the group open now may hold only other requests' changes.
  app.addHook('onSend', (req, _reply, payload, done) => {
    const onDisk = core.store.settled?.();
    if (!onDisk) return done(null, payload);
    // liveness and readiness show counts, not changes: they never wait for a commit
    const url = routeOf(req).url;
    if (url === '/health' || url === '/ready') return done(null, payload);
    const send = () => done(null, payload);
    onDisk.then(send, send);
  });

  // Security: overload first (cheapest refusal), then who is calling, then the per-token limit.
  const overloaded = await installOverloadProtection(app, config);
  const auth = installAuth(app, {
    tokens,
    localOnly: tokens === null && !config.authDisabled,
    credentials: deps.credentials ?? new StoreLauncherCredentials(core),
    jobHolder: async (jobId) => (await core.getJob(jobId)).launcher_id,
    ...agentAuth(core.store),
  });
  installCreationLimit(app, config, clock);
  logSecurity(config, tokens, logger);

  let sweeper: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> | undefined;
  // sweeps refused by the store (a full disk, a database that is down) since the last that worked:
  // told once, not at every sweep (the store itself logs when its writes fail and work again)
  let sweepsRefused = 0;
  app.addHook('onReady', async () => {
    core.reopen();
    sweeper = setInterval(() => {
      if (sweeping) return; // the previous sweep is still running
      sweeping = core
        .sweep()
        .then(() => {
          if (sweepsRefused > 0) logger.info({ refused_sweeps: sweepsRefused }, 'sweeps work again');
          sweepsRefused = 0;
        })
        .catch((err: unknown) => {
          // cut short by the shutdown (the store closed under it: see onClose); a bug still says so
          if (closing && err instanceof CoordinatorError) return logger.info({ err }, 'sweep given up on at shutdown');
          if (!(err instanceof CoordinatorError && err.code === 'storage_unavailable')) return logger.error({ err }, 'sweep failed');
          if (sweepsRefused++ === 0) logger.error({ err }, 'sweep failed: the store refuses changes; sweeps go on and will make them once it takes them');
        })
        .finally(() => (sweeping = undefined));
    }, config.sweepIntervalMs);
    sweeper.unref();
  });
  app.addHook('preClose', async () => {
    clearInterval(sweeper);
    core.close();
  });
  app.addHook('onClose', async () => {
    metrics.close();
    if (!ownsCore) {
      // the core outlives this app (it may be served again): its sweep is left to finish
      await sweeping;
      return;
    }
    // a sweep under way finishes (each change of it is a transaction of its own), unless it is
    // stuck on the store (a database host that froze under one of its statements, which only
    // DATABASE_QUERY_TIMEOUT_MS would end, past main's 10 s): the store is closed under it then,
    // which gives its connection up (the statement fails, nothing of an open transaction is
    // made) and refuses what the sweep would do next. Not waited for afterwards: what is left of
    // it only meets a closed store.
    if (sweeping) await settledWithin(sweeping, SWEEP_DRAIN_MS);
    await core.shutdown();
  });

  app.decorate('auth', auth);
  app.decorate('reloadSecrets', () => reloadSecrets(app, config, logger));
  await installOpenApi(app); // first: it records the routes as they are added
  await app.register(jobRoutes, { core });
  await app.register(launcherRoutes, { core });
  await app.register(launchersRoutes, { core, startedAt, overloaded });
  await app.register(sessionRoutes, { core });
  await app.register(eventRoutes, { core, clients: sse, keepaliveMs: sseKeepaliveMs(config) });
  await app.register(metricsRoutes, { metrics });
  await app.register(dashboardRoutes, { dir: deps.dashboardDir ?? DEFAULT_DASHBOARD_DIR });
  app.decorate('core', core);
  return app;
}

/** Read the token file, if any; a bad one stops the start, naming AUTH_TOKENS_FILE. */
function loadTokens(config: CoordinatorConfig): TokenStore | null {
  if (config.authTokensFile === null) return null;
  try {
    return new TokenStore(config.authTokensFile);
  } catch (err) {
    if (err instanceof TokenFileError) throw new ConfigError('AUTH_TOKENS_FILE', err.message);
    throw err;
  }
}

/**
 * Read the certificate and key, and check that TLS can use them: a file that holds no PEM
 * certificate, a key it cannot decode or the key of another certificate is refused here, naming
 * its variable, before any state is touched (Fastify would throw OpenSSL's error, with a stack
 * trace and no variable, after the database was opened; a SIGHUP keeps the pair in force).
 */
function readTls(config: CoordinatorConfig): { cert: Buffer; key: Buffer } | undefined {
  if (config.tlsCertFile === null || config.tlsKeyFile === null) return undefined;
  const read = (variable: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new ConfigError(variable, `cannot read ${path}: ${(err as Error).message}`);
    }
  };
  const cert = read('TLS_CERT_FILE', config.tlsCertFile);
  const key = read('TLS_KEY_FILE', config.tlsKeyFile);
  try {
    createSecureContext({ cert });
  } catch (err) {
    throw new ConfigError('TLS_CERT_FILE', `${config.tlsCertFile} is not a PEM certificate (chain) TLS can use: ${(err as Error).message}`);
  }
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    const message = (err as Error).message;
    throw new ConfigError(
      'TLS_KEY_FILE',
      /key values mismatch/.test(message)
        ? `${config.tlsKeyFile} is not the private key of the certificate in TLS_CERT_FILE (${config.tlsCertFile}): ${message}`
        : `${config.tlsKeyFile} is not a PEM private key TLS can use (unencrypted): ${message}`,
    );
  }
  return { cert, key };
}

function logSecurity(config: CoordinatorConfig, tokens: TokenStore | null, logger: Logger): void {
  const tls = config.tlsCertFile !== null;
  if (tokens) {
    logger.info({ tokens: tokens.summary, tls }, `authentication on: ${tokens.size} token(s) from ${tokens.path}`);
    if (tokens.size === 0) logger.warn('the token file lists no token: every request but the public ones is refused (add one, then send SIGHUP)');
    if (!tls && !isLoopback(config.host)) {
      logger.warn({ host: config.host }, 'tokens travel in clear text: set TLS_CERT_FILE and TLS_KEY_FILE (or terminate TLS in front)');
    }
  } else if (config.authDisabled) {
    logger.warn(
      { host: config.host },
      'authentication disabled (AUTH_DISABLED=true): anyone who can reach this port can run prompts on every launcher',
    );
  }
}

/** SIGHUP: re-read the token file and the TLS certificate. A bad file keeps what is in force. */
function reloadSecrets(app: FastifyInstance, config: CoordinatorConfig, logger: Logger): void {
  if (app.auth.enabled) {
    try {
      const { added, removed, count, cut } = app.auth.reload();
      logger.info({ added, removed, count, open_requests_cut: cut }, 'token file reloaded');
    } catch (err) {
      logger.error({ error: (err as Error).message }, 'token file not reloaded: keeping the tokens in force');
    }
  } else {
    logger.info('SIGHUP: authentication is off (no AUTH_TOKENS_FILE); no tokens to reload');
  }
  if (config.tlsCertFile !== null) {
    try {
      const tls = readTls(config)!;
      (app.server as unknown as HttpsServer).setSecureContext(tls);
      logger.info('TLS certificate reloaded');
    } catch (err) {
      logger.error({ error: (err as Error).message }, 'TLS certificate not reloaded: keeping the one in force');
    }
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    core: Coordinator;
    auth: Auth;
    /** re-read the token file and the TLS certificate (main.ts calls it on SIGHUP) */
    reloadSecrets(): void;
  }
}

/**
 * The queued bytes MAX_QUEUED_BYTES bounds, as admission reads them; none for a store that does
 * not count them (PostgreSQL: pending prompts stay in the database), whose gauges are left out.
 */
function queuedBytesSource(store: Coordinator['store']): { queuedBytes?: { prompts(): number; messages(): number; outcomes(): number } } {
  const prompts = store.pendingPromptBytes?.bind(store);
  if (!prompts) return {};
  const messages = store.pendingMessageBytes?.bind(store);
  const outcomes = store.heldOutcomeBytes?.bind(store);
  return { queuedBytes: { prompts, messages: () => messages?.() ?? 0, outcomes: () => outcomes?.() ?? 0 } };
}

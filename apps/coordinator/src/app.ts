import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import type { CoordinatorConfig } from './config.js';
import { systemClock, type Clock } from './core/clock.js';
import { Coordinator } from './core/coordinator.js';
import { dashboardRoutes, DEFAULT_DASHBOARD_DIR } from './http/dashboard.js';
import { installErrorHandling } from './http/errors.js';
import { eventRoutes } from './http/events.js';
import { jobRoutes } from './http/jobs.js';
import { launcherRoutes } from './http/launcher.js';
import { launchersRoutes } from './http/launchers.js';
import { installRequestMetrics, metricsRoutes } from './http/metrics.js';
import { installOpenApi } from './http/openapi.js';
import { RequestLog } from './http/request-log.js';
import { sessionRoutes } from './http/sessions.js';
import { typeboxValidatorCompiler } from './http/validation.js';
import { CoordinatorMetrics } from './metrics/metrics.js';
import { coordinatorSource } from './metrics/source.js';

export interface AppDeps {
  /** the domain core; pass one to keep state across app instances (a restart in tests) */
  core?: Coordinator;
  clock?: Clock;
  logger?: Logger;
  /** the built dashboard served at `/` (default: apps/dashboard/dist/public of this repository) */
  dashboardDir?: string;
}

export function createLogger(config: CoordinatorConfig): Logger {
  return pino({
    level: config.logLevel,
    base: { service: 'agentq-coordinator' },
    redact: ['req.headers.authorization'],
  });
}

/**
 * Build the coordinator's Fastify app, not listening (only main.ts and startCoordinator listen).
 * Opens the store named by DATABASE_URL unless a core is passed in. The sweeper (staleness,
 * leases, timeouts, history) runs while the app is ready.
 */
export async function buildApp(config: CoordinatorConfig, deps: AppDeps = {}): Promise<FastifyInstance> {
  const logger = deps.logger ?? createLogger(config);
  const clock = deps.clock ?? systemClock;
  const ownsCore = deps.core === undefined;
  const core = deps.core ?? (await Coordinator.open(config, { clock, logger }));
  const startedAt = clock.now();

  // Bodies may carry a prompt of up to maxPromptBytes, which JSON escaping can grow.
  const bodyLimit = Math.max(1024 * 1024, config.maxPromptBytes * 2 + 64 * 1024, config.outputMaxBytes * 2);
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new RequestLog(), // one line per request; long-polls at debug
    bodyLimit,
    return503OnClosing: true,
    forceCloseConnections: true,
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.setValidatorCompiler(typeboxValidatorCompiler);
  // The API speaks JSON only: other bodies get 415 rather than a confusing type error.
  app.removeContentTypeParser('text/plain');
  installErrorHandling(app);

  // after the restore: the metrics count the restored jobs once, then follow the events
  const eventStreams = new Set<() => void>();
  const metrics = new CoordinatorMetrics(coordinatorSource(core), { sseClients: () => eventStreams.size });
  installRequestMetrics(app, metrics);

  let sweeper: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> | undefined;
  app.addHook('onReady', async () => {
    core.reopen();
    sweeper = setInterval(() => {
      if (sweeping) return; // the previous sweep is still running
      sweeping = core
        .sweep()
        .catch((err: unknown) => logger.error({ err }, 'sweep failed'))
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
    await sweeping;
    if (ownsCore) await core.shutdown();
  });

  await installOpenApi(app); // first: it records the routes as they are added
  await app.register(jobRoutes, { core });
  await app.register(launcherRoutes, { core });
  await app.register(launchersRoutes, { core, startedAt });
  await app.register(sessionRoutes, { core });
  await app.register(eventRoutes, { core, streams: eventStreams });
  await app.register(metricsRoutes, { metrics });
  await app.register(dashboardRoutes, { dir: deps.dashboardDir ?? DEFAULT_DASHBOARD_DIR });
  app.decorate('core', core);
  return app;
}

declare module 'fastify' {
  interface FastifyInstance {
    core: Coordinator;
  }
}

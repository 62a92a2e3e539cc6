import type { FastifyInstance } from 'fastify';
import { buildApp, type AppDeps } from './app.js';
import { loadConfig, type CoordinatorConfig } from './config.js';
import type { Coordinator } from './core/coordinator.js';

export interface RunningCoordinator {
  url: string;
  port: number;
  app: FastifyInstance;
  core: Coordinator;
  close(): Promise<void>;
}

/**
 * Build and listen, for tests, benchmarks and embedding: defaults to 127.0.0.1 on a free port
 * silent logs and the memory store. Pass `deps.core` to serve an existing core (a restart that keeps state).
 * The event-loop-delay overload check is off unless asked for: in a process shared with tests
 * (or an embedding program) it would measure them, not the coordinator.
 */
export async function startCoordinator(
  overrides: Partial<CoordinatorConfig> = {},
  deps: AppDeps = {},
): Promise<RunningCoordinator> {
  const config = loadConfig(
    {},
    { host: '127.0.0.1', port: 0, logLevel: 'silent', databaseUrl: 'memory:', overloadMaxEventLoopDelayMs: 0, ...overrides },
  );
  const app = await buildApp(config, deps);
  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    // a port in use (EADDRINUSE) or an address this machine lacks: what buildApp opened (the
    // store, and the sweeper its ready hook started) is closed again, so a caller that retries
    // or gives up is not left with a second coordinator running on the same core or database
    await app.close().catch(() => undefined);
    throw err;
  }
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('coordinator did not bind a TCP port');
  return {
    url: `${config.tlsCertFile !== null ? 'https' : 'http'}://${config.host.includes(':') ? `[${config.host}]` : config.host}:${address.port}`,
    port: address.port,
    app,
    core: app.core,
    close: () => app.close(),
  };
}

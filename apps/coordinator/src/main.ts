#!/usr/bin/env node
import { buildApp, createLogger } from './app.js';
import { ConfigError, loadConfig } from './config.js';

/** The coordinator process: the only place that listens and calls process.exit. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`agentq-coordinator: invalid configuration: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger(config);
  const app = await buildApp(config, { logger });

  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    closing = true;
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      logger.error('shutdown took too long: exiting');
      process.exit(1);
    }, 10_000);
    force.unref();
    app.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));

  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    logger.fatal({ err }, 'could not listen');
    process.exit(1);
  }
  const address = app.server.address();
  const port = address !== null && typeof address === 'object' ? address.port : config.port;
  logger.info({ host: config.host, port, database: redactUrl(config.databaseUrl) }, 'coordinator ready');
}

/** A database URL without its password, for logs. */
function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]+:)[^@]*@/, '$1***@');
}

main().catch((err: unknown) => {
  process.stderr.write(`agentq-coordinator: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

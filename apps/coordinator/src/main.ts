#!/usr/bin/env node
import { buildApp, createLogger } from './app.js';
import { ConfigError, loadConfig } from './config.js';

/** The coordinator process: the only place that listens and calls process.exit. */
async function main(): Promise<void> {
  let config;
  let app;
  let logger;
  try {
    config = loadConfig(process.env);
    logger = createLogger(config);
    // also refuses a weak set-up (no tokens off loopback) and an unreadable token file or certificate
    app = await buildApp(config, { logger });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`agentq-coordinator: invalid configuration: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }

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
  // re-read AUTH_TOKENS_FILE (and the TLS certificate): add or remove tokens without a restart
  process.on('SIGHUP', () => {
    logger.info({ signal: 'SIGHUP' }, 'reloading the token file and certificate');
    app.reloadSecrets();
  });

  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    logger.fatal({ err }, 'could not listen');
    process.exit(1);
  }
  const address = app.server.address();
  const port = address !== null && typeof address === 'object' ? address.port : config.port;
  logger.info(
    {
      host: config.host,
      port,
      url: `${config.tlsCertFile !== null ? 'https' : 'http'}://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`,
      state_file: config.stateFile,
      auth: app.auth.enabled ? 'tokens' : config.authDisabled ? 'disabled' : 'open (loopback only)',
    },
    'coordinator ready',
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`agentq-coordinator: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { buildApp, createLogger } from './app.js';
import { CONFIG_ENV_VARS, ConfigError, loadConfig, StartupError } from './config.js';
import { redactDatabaseUrl } from './core/store/database-url.js';
import { stdoutDestination } from './log-destination.js';

/**
 * The command line: configuration comes from the environment, so the only flags are the ones
 * that print something and exit; anything else is refused rather than ignored.
 */
function handleArguments(argv: string[]): void {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'V' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    process.stderr.write(
      `agentq-coordinator: ${(err as Error).message}\nIt is configured by environment variables: run agentq-coordinator --help.\n`,
    );
    process.exit(2);
  }
  if (values.version) {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    process.stdout.write(`agentq-coordinator ${pkg.version}\n`);
    process.exit(0);
  }
  if (values.help) {
    process.stdout.write(
      [
        'Usage: agentq-coordinator',
        '',
        'Runs the agentq coordinator: the job queue, launcher registry and sessions, over HTTP.',
        'It is configured by environment variables (defaults and meanings: docs/operations.md):',
        '',
        ...CONFIG_ENV_VARS.map((v) => `  ${v.name}`),
        '',
        'Options:',
        '  -h, --help     show this help',
        '  -V, --version  print the version',
        '',
        'SIGTERM/SIGINT shut it down cleanly; a second signal exits at once.',
        '',
      ].join('\n'),
    );
    process.exit(0);
  }
}

/**
 * A coordinator runs for months: a smaller heap, collected a little more often, is the better
 * trade than V8's default growth (docs/benchmarks.md, "Memory bounded by active work"). A
 * --heap-growing-percent given to node itself wins. Returns what is in effect, for the log.
 */
function applyHeapGrowth(percent: number): number | 'node flag' | 'v8 default' {
  if (process.execArgv.some((a) => /^--heap[-_]growing[-_]percent/.test(a))) return 'node flag';
  if (percent === 0) return 'v8 default';
  setFlagsFromString(`--heap-growing-percent=${percent}`);
  return percent;
}

/** The coordinator process: the only place that listens and calls process.exit. */
async function main(): Promise<void> {
  handleArguments(process.argv.slice(2));
  // a SIGHUP while the coordinator starts (waiting for another one to migrate the database, say)
  // must not end it, as Node's default would: it is answered once the coordinator is built
  let reload: (() => void) | undefined;
  let reloadAsked = false;
  process.on('SIGHUP', () => (reload ? reload() : (reloadAsked = true)));
  let config;
  let app;
  let logger;
  let heapGrowth;
  try {
    config = loadConfig(process.env);
    heapGrowth = applyHeapGrowth(config.heapGrowthPercent);
    logger = createLogger(config);
    // also refuses a weak set-up (no tokens off loopback) and an unreadable token file or certificate
    app = await buildApp(config, { logger });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`agentq-coordinator: invalid configuration: ${err.message}\n`);
      process.exit(2);
    }
    if (err instanceof StartupError) {
      process.stderr.write(`agentq-coordinator: ${err.message}\n`);
      process.exit(1);
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
    // log lines still queued for stdout go out first, unless stdout is stuck (log-destination.ts)
    const exit = (code: number) => void stdoutDestination(config.logBufferBytes).flush(1000).then(() => process.exit(code));
    app.close().then(
      () => exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  // re-read AUTH_TOKENS_FILE (and the TLS certificate): add or remove tokens without a restart
  reload = () => {
    logger.info({ signal: 'SIGHUP' }, 'reloading the token file and certificate');
    app.reloadSecrets();
  };
  if (reloadAsked) reload();

  try {
    // a deep accept queue (the kernel caps it at net.core.somaxconn): a burst of connections
    // while the event loop is busy waits there instead of having its SYNs dropped and retried
    // seconds later
    await app.listen({ host: config.host, port: config.port, backlog: 4096 });
  } catch (err) {
    logger.fatal({ err }, 'could not listen');
    await stdoutDestination(config.logBufferBytes).flush(1000);
    // said on stderr too, as every other failed start is: the log may be silent (LOG_LEVEL), or
    // read by nobody at the terminal that started it; HOST and PORT are what to change
    process.stderr.write(
      `agentq-coordinator: cannot listen on HOST=${config.host} PORT=${config.port}: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    process.exit(1);
  }
  const address = app.server.address();
  const port = address !== null && typeof address === 'object' ? address.port : config.port;
  logger.info(
    {
      host: config.host,
      port,
      url: `${config.tlsCertFile !== null ? 'https' : 'http'}://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`,
      database: redactDatabaseUrl(config.databaseUrl),
      auth: app.auth.enabled ? 'tokens' : config.authDisabled ? 'disabled' : 'open (loopback only)',
      heap_growth_percent: heapGrowth,
    },
    'coordinator ready',
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`agentq-coordinator: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

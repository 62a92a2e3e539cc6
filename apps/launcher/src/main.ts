#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { pino } from 'pino';
import { ConfigError, helpText, loadConfig } from './config.js';
import { Launcher } from './launcher.js';

/**
 * Where the log goes: stdout, written asynchronously (a stdout that does not drain never blocks
 * the launcher). Ended before the process exits: see `exit`.
 */
const logDestination = pino.destination({ dest: 1, sync: false });

/**
 * The launcher process: the only place that reads process.argv/env, handles signals and exits.
 * Exit codes: 0 after a clean shutdown or deregistration, 1 on a fatal error or a forced exit,
 * 2 on a bad option.
 */
async function main(): Promise<number> {
  let loaded;
  try {
    loaded = loadConfig(process.argv.slice(2), process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`agentq-launcher: ${err.message}\nRun agentq-launcher --help for the options.\n`);
      return 2;
    }
    throw err;
  }
  if (loaded.help) {
    process.stdout.write(loaded.version ? `agentq-launcher ${packageVersion() ?? 'unknown'}\n` : helpText());
    return 0;
  }
  const { config } = loaded;
  const log = pino({ name: 'agentq-launcher', level: config.logLevel }, logDestination);
  const launcher = new Launcher(config, { log, version: packageVersion() });

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals === 1) {
      log.info({ signal }, 'signal received; draining (send it again to force exit)');
      void launcher.shutdown();
      return;
    }
    log.warn({ signal }, 'second signal; killing executors and exiting now');
    launcher.forceKill();
    exit(1);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    await launcher.run();
    return 0;
  } catch (err) {
    launcher.forceKill();
    if (err instanceof ConfigError) {
      log.fatal({ option: err.option }, err.message);
      process.stderr.write(`agentq-launcher: ${err.message}\n`);
      return 2;
    }
    log.fatal({ err }, 'launcher failed');
    return 1;
  }
}

function packageVersion(): string | undefined {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version;
  } catch {
    return undefined;
  }
}

/**
 * Exit once the log is written out. At process.exit pino writes what is still queued
 * synchronously, and retries a failed write for ever (sonic-boom 4): with stdout a broken pipe
 * (`agentq-launcher | head`, a log shipper that died) the launcher never exited. So the log is
 * ended first: it closes once written, or fails with the EPIPE, after which pino writes nothing
 * more (its exit flush included). A stdout that does not drain gets EXIT_LOG_FLUSH_MS.
 */
function exit(code: number): void {
  process.exitCode = code;
  const done = () => process.exit(code);
  logDestination.once('close', done);
  logDestination.once('error', done);
  setTimeout(done, EXIT_LOG_FLUSH_MS).unref();
  logDestination.end();
}
const EXIT_LOG_FLUSH_MS = 2_000;

main().then(exit, (err: unknown) => {
  process.stderr.write(`agentq-launcher: ${String(err)}\n`);
  exit(1);
});

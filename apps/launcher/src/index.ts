export { Launcher, type LauncherDeps, type LauncherExit } from './launcher.js';
export { loadConfig, helpText, ConfigError, OPTIONS, type LauncherConfig, type LogLevel } from './config.js';
export { resolveExecutor, BUILTIN_EXECUTORS, type ExecutorSpec } from './executors/index.js';
export { ExecutorProcess, parseEventLine, type ExecutorExit } from './executor-process.js';
export { buildExecutorEnv, type JobEnv } from './executor-env.js';
export { Reporter, type Report, type ReportOutcome } from './reporter.js';

export { run } from './run.js';
export type { CliIo, Sink, CommandContext, CommandResult } from './context.js';
export { parseDuration, formatDuration } from './duration.js';
export { describeJob, POLL_INTERVAL_MS } from './descriptor.js';
export { waitExitCode } from './commands/wait.js';
export { toCliFailure, UsageError, InterruptedError } from './errors.js';
export { COMMANDS } from './commands/index.js';
export { DEFAULT_URL, mainHelp, commandHelp } from './help.js';

import { AgentqApiError, AgentqConnectionError, toError } from '@agentq/client';
import { CliExitCodes, type CliError, type CliExitCode } from '@agentq/protocol';

/** The command line is wrong: unknown flag, missing argument, bad duration. Exit 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
  readonly code = 'usage_error';
  constructor(
    message: string,
    /** the command whose help to point at, if any */
    readonly command?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Ctrl-C / SIGTERM before the coordinator answered anything (the abort reason main.ts uses). */
export class InterruptedError extends Error {
  override readonly name = 'InterruptedError';
  readonly code = 'interrupted';
  constructor() {
    super('interrupted');
  }
}

/** A failure of the command itself, ready to print: envelope error + exit code. */
export interface CliFailureInfo {
  error: CliError;
  exitCode: CliExitCode;
}

/**
 * Coordinator error codes that mean "your request was refused as asked": fixing the arguments
 * (another session name, an existing parent, ...) is the way out, so they exit 2 like usage errors.
 */
const REJECTED_CODES: ReadonlySet<string> = new Set([
  'validation_failed',
  'session_exists',
  'session_not_found',
  'parent_session_not_found',
  'session_idle',
  'depth_exceeded',
  'payload_too_large',
  'route_not_found',
]);

/** Map anything a command threw to the envelope error and exit code (the one place that does). */
export function toCliFailure(err: unknown): CliFailureInfo {
  if (err instanceof UsageError) {
    return { error: { code: err.code, message: err.message }, exitCode: CliExitCodes.usage_error };
  }
  if (err instanceof InterruptedError) {
    return { error: { code: err.code, message: err.message }, exitCode: CliExitCodes.internal_error };
  }
  if (err instanceof AgentqConnectionError) {
    return { error: { code: err.code, message: err.message }, exitCode: CliExitCodes.internal_error };
  }
  if (err instanceof AgentqApiError) {
    const error: CliError = { code: err.code, message: err.message };
    if (err.details) error.details = err.details;
    if (err.code === 'job_not_found') return { error, exitCode: CliExitCodes.not_found };
    if (REJECTED_CODES.has(err.code)) return { error, exitCode: CliExitCodes.usage_error };
    return { error, exitCode: CliExitCodes.internal_error };
  }
  const e = toError(err);
  return { error: { code: 'internal_error', message: e.message }, exitCode: CliExitCodes.internal_error };
}

/** The error a command raises itself when a job id is unknown (same code as the coordinator's). */
export function jobNotFound(ids: readonly string[]): AgentqApiError {
  const list = ids.join(', ');
  return new AgentqApiError(404, 'job_not_found', ids.length === 1 ? `job ${list} not found` : `jobs not found: ${list}`, {
    job_ids: [...ids],
  });
}

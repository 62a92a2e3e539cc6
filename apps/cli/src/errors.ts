import { AgentqApiError, AgentqAuthError, AgentqConnectionError, AgentqUsageError, NOT_TLS, tlsRefusalOf, toError } from '@agentq/client';
import { CliExitCodes, type CliError, type CliExitCode, type JobDescriptor } from '@agentq/protocol';
import { shellQuote } from './descriptor.js';
import { printableLine } from './table.js';

/** The command line is wrong: unknown flag, missing argument, bad duration. Exit 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
  readonly code = 'usage_error';
  constructor(
    message: string,
    /** the command whose help to point at (`status`, `session stop`), if any */
    public command?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Ctrl-C / SIGTERM before the coordinator answered anything (the abort reason main.ts uses). */
export class InterruptedError extends Error {
  override readonly name = 'InterruptedError';
  readonly code = 'interrupted';
  constructor(message = 'interrupted') {
    super(message);
  }
}

/**
 * The thing a command names does not exist (a session for `send`, a launcher for
 * `launchers rm`): exit 5 like an unknown job, with the coordinator's own code.
 */
export class NotFoundError extends Error {
  override readonly name = 'NotFoundError';
  constructor(readonly apiError: AgentqApiError) {
    super(apiError.message, { cause: apiError });
  }
}

/** Turn the coordinator's `code` into a NotFoundError (exit 5) for this one call. */
export async function notFoundOn<T>(code: string, call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (err) {
    if (err instanceof AgentqApiError && err.code === code) throw new NotFoundError(err);
    throw err;
  }
}

/**
 * `start --wait` / `resume --wait`: the job was created, then the wait failed (the coordinator
 * went away past the deadline, refused for now, ...). The failure is the cause's (its code and
 * exit code); `job` (as last seen) names the job, which exists and goes on, so that the caller
 * follows it instead of running the command again, which would add another job.
 */
export class JobCreatedError extends Error {
  override readonly name = 'JobCreatedError';
  constructor(
    readonly job: JobDescriptor,
    cause: unknown,
  ) {
    super(toError(cause).message, { cause });
  }
}

/** A next step for people, printed under the error (text mode only). */
const NEXT_STEPS: Readonly<Record<string, string>> = {
  session_exists: 'start makes a new session; to continue this one: agentq resume <session> -p <prompt>',
  session_not_found: 'agentq sessions lists the sessions; start creates one',
  coordinator_unreachable: 'is the coordinator running? (npm start, or --url / AGENTQ_URL)',
};

export function nextStep(code: string, details?: Record<string, unknown>): string | undefined {
  const tls = details?.['tls_error'];
  if (code === 'coordinator_unreachable' && typeof tls === 'string') {
    return tls === NOT_TLS
      ? 'the coordinator there does not speak TLS: use an http:// URL (it serves https:// only with TLS_CERT_FILE and TLS_KEY_FILE)'
      : "the coordinator's TLS certificate is not trusted here: give the CA certificate that signed it with --ca-file or AGENTQ_CA_FILE, and use a host name the certificate names";
  }
  // a closed session cannot be resumed either: the coordinator's message says to pick another name
  if (code === 'session_exists' && details?.['current_status'] === 'closed') return undefined;
  // the command to copy, with the session the coordinator named, rather than a template to fill in
  const session = details?.['session_name'];
  if (code === 'session_exists' && typeof session === 'string' && session !== '') {
    const command = resumeCommand(session);
    if (command !== undefined) return `start makes a new session; to continue this one: ${command}`;
  }
  return NEXT_STEPS[code];
}

/**
 * `agentq resume <session> -p <prompt>` for the shell, or undefined when no such line is safe to
 * print. A name that starts with `-` would be read as an option (quoting does not change that):
 * it goes after `--`, once the options are given. A control character (an escape sequence) would
 * drive the reader's terminal, and a POSIX shell has no quoting that spells it in printable
 * characters: the hint is then the template, as the error's message shows the name escaped.
 */
function resumeCommand(session: string): string | undefined {
  if (printableLine(session) !== session) return undefined;
  const name = shellQuote(session);
  return session.startsWith('-') ? `agentq resume -p <prompt> -- ${name}` : `agentq resume ${name} -p <prompt>`;
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
  'bad_request',
  'session_exists',
  'session_not_found',
  'parent_session_not_found',
  'session_idle',
  'session_closed',
  'parent_stopping',
  'depth_exceeded',
  'budget_exceeded',
  'idempotency_key_reused',
  'payload_too_large',
  'unsupported_media_type',
  'route_not_found',
]);

/** What to do about a refusal, added to the coordinator's message for people. */
const REFUSAL_HINTS: Readonly<Record<number, string>> = {
  401: 'give a token with --token or AGENTQ_TOKEN (agentq token create makes one)',
  403: "this token's role may not do that (see the roles in docs/operations.md)",
};

const AGENT_REFUSAL_HINT = "a job's agent token acts only on its own session and the sessions below it (docs/operations.md, Agent tokens)";

function apiFailure(err: AgentqApiError, exitCode: CliExitCode): CliFailureInfo {
  const error: CliError = { code: err.code, message: err.message };
  if (err.details) error.details = err.details;
  return { error, exitCode };
}

/** Map anything a command threw to the envelope error and exit code (the one place that does). */
export function toCliFailure(err: unknown): CliFailureInfo {
  if (err instanceof JobCreatedError) {
    const failure = toCliFailure(err.cause);
    failure.error.job = err.job;
    return failure;
  }
  if (err instanceof UsageError) {
    return { error: { code: err.code, message: err.message }, exitCode: CliExitCodes.usage_error };
  }
  if (err instanceof AgentqUsageError) {
    // a token that cannot be sent (a stray line break, a typographic quote): fix it and run again
    return { error: { code: 'usage_error', message: err.message }, exitCode: CliExitCodes.usage_error };
  }
  if (err instanceof InterruptedError) {
    return { error: { code: err.code, message: err.message }, exitCode: CliExitCodes.internal_error };
  }
  if (err instanceof AgentqConnectionError) {
    const tls = tlsRefusalOf(err);
    const error: CliError = { code: err.code, message: err.message };
    // reached, but TLS refused it: not a coordinator that is down (nextStep says what to fix)
    if (tls !== undefined) error.details = { tls_error: tls };
    return { error, exitCode: CliExitCodes.internal_error };
  }
  if (err instanceof NotFoundError) return apiFailure(err.apiError, CliExitCodes.not_found);
  if (err instanceof AgentqApiError) {
    if (err.status === 401 || err.status === 403) {
      // authentication and permission: the coordinator refused the request, retrying won't help
      const failure = apiFailure(err, CliExitCodes.usage_error);
      // the client's AgentqAuthError says who refused already
      const refused = err instanceof AgentqAuthError ? err.message : `the coordinator refused the request: ${err.message}`;
      // an agent token (inside a job) is refused for its scope, not for a role
      const agent = err.status === 403 && typeof err.details?.['agent_session_name'] === 'string';
      failure.error.message = `${refused}; ${agent ? AGENT_REFUSAL_HINT : REFUSAL_HINTS[err.status]}`;
      return failure;
    }
    if (err.code === 'job_not_found') return apiFailure(err, CliExitCodes.not_found);
    if (REJECTED_CODES.has(err.code)) return apiFailure(err, CliExitCodes.usage_error);
    return apiFailure(err, CliExitCodes.internal_error);
  }
  const e = toError(err);
  return { error: { code: 'internal_error', message: e.message }, exitCode: CliExitCodes.internal_error };
}

/** The error a command raises itself when a job id is unknown (same code as the coordinator's). */
export function jobNotFound(ids: readonly string[]): AgentqApiError {
  const list = ids.join(', ');
  return new AgentqApiError(
    404,
    'job_not_found',
    ids.length === 1 ? `job ${list} not found` : `jobs not found: ${list}`,
    {
      job_ids: [...ids],
    },
  );
}

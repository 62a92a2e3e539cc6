import { ErrorCodes, type ErrorCode, type JobStatus } from '@agentq/protocol';

/** A coded error of the domain; the HTTP layer maps `code` to a status via ErrorCodes. */
export class CoordinatorError extends Error {
  override readonly name = 'CoordinatorError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
  get statusCode(): number {
    return ErrorCodes[this.code];
  }
}

export const jobNotFound = (jobId: string) =>
  new CoordinatorError('job_not_found', `job ${jobId} not found`, { job_id: jobId });

export const launcherUnknown = (launcherId: string, why = 'is not registered') =>
  new CoordinatorError('launcher_unknown', `launcher ${launcherId} ${why}; register again`, {
    launcher_id: launcherId,
  });

export const invalidTransition = (jobId: string, from: JobStatus, to: JobStatus | string) =>
  new CoordinatorError('invalid_transition', `job ${jobId} is ${from}; it cannot become ${to}`, {
    job_id: jobId,
    current_status: from,
    requested: to,
  });

/** A value refused past its schema; `where` is the part of the request it came in, as for schema failures. */
export const validation = (field: string, message: string, where: 'body' | 'querystring' = 'body') =>
  new CoordinatorError('validation_failed', `${field}: ${message}`, { field, in: where });

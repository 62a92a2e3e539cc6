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

/**
 * 503 `storage_unavailable` because no connection to the database could be had: it is down,
 * refuses connections, or accepts them and never answers (each such attempt waits out the pool's
 * connect timeout), the pool stayed full for that long, or the store is closed; or a statement
 * of the change went unanswered for the query timeout (a database host that froze). Nothing of
 * the change was committed then (`details.applied: false`), unless the statement left unanswered
 * was its COMMIT (no `applied`: its outcome is unknown). On the wire it is the same error as any
 * other `storage_unavailable`; the class tells a caller that runs several changes in a row (a
 * sync's reports) that the next one would wait as long and fail the same way, so it stops there.
 * Not for a change the database refused (SQLite's disk full: another change may fit), nor for a
 * connection lost during a COMMIT (its outcome is unknown; the next change may well go through).
 */
export class StoreUnreachableError extends CoordinatorError {
  constructor(message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super('storage_unavailable', message, details);
    if (options && 'cause' in options) (this as { cause?: unknown }).cause = options.cause;
  }
}

export const isStoreUnreachable = (err: unknown): boolean => err instanceof StoreUnreachableError;

/**
 * `err` as the answer of a request that made changes before the one that failed (a sync's earlier
 * reports, a tree stop's first pass): `details.applied: false`, true of the failed change, is
 * not true of the request, and is taken off (the answer says then what an old coordinator's does:
 * something may have been applied).
 */
export function afterChanges(err: unknown): unknown {
  if (err instanceof CoordinatorError && err.details?.['applied'] === false) delete err.details['applied'];
  return err;
}

/**
 * The rest of a request whose change is committed (the reads its answer needs): a failure there
 * is answered without `details.applied: false` (afterChanges), which a read that gets no
 * connection says of itself, not of the request.
 */
export async function afterCommit<T>(rest: () => Promise<T>): Promise<T> {
  try {
    return await rest();
  } catch (err) {
    throw afterChanges(err);
  }
}

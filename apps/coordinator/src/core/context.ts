import { canTransition, isTerminal, type JobStatus } from '@agentq/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import type { Clock } from './clock.js';
import { CoordinatorError, invalidTransition, jobNotFound, launcherUnknown } from './errors.js';
import type { JobPatch, JobRow, LauncherRow, SessionRow } from './rows.js';
import type { Store, Tx } from './store/store.js';

/** What every lifecycle module works with. */
export interface CoreContext {
  readonly config: CoordinatorConfig;
  readonly store: Store;
  readonly clock: Clock;
  readonly log: Logger;
}

/**
 * The single place where a job's status changes: checks the transition table and stamps
 * `updatedAt` (and `completedAt` on reaching a terminal status). Returns the patch to apply, a new
 * object each time (callers add their fields to it).
 */
export function transition(job: JobRow, to: JobStatus, now: number): JobPatch {
  if (!canTransition(job.status, to)) throw invalidTransition(job.id, job.status, to);
  return isTerminal(to) ? { status: to, updatedAt: now, completedAt: now } : { status: to, updatedAt: now };
}

export async function mustJob(tx: Tx, id: string): Promise<JobRow> {
  const job = await tx.job(id);
  if (!job) throw jobNotFound(id);
  return job;
}

export async function mustSession(tx: Tx, name: string): Promise<SessionRow> {
  const s = await tx.session(name);
  if (!s) throw new CoordinatorError('session_not_found', `session ${name} not found`, { session_name: name });
  return s;
}

/** A launcher that may poll and report: registered and not declared stale (else 401). */
export async function liveLauncher(tx: Tx, id: string): Promise<LauncherRow> {
  const launcher = await tx.launcher(id);
  if (!launcher) throw launcherUnknown(id);
  if (launcher.status === 'stale') throw launcherUnknown(id, 'was declared stale');
  return launcher;
}

export async function isBusy(tx: Tx, sessionName: string): Promise<boolean> {
  return (await tx.activeJobOf(sessionName)) !== undefined || (await tx.pendingJobsOf(sessionName)).length > 0;
}

type Level = 'debug' | 'info' | 'warn' | 'error';
export type TxLogger = Record<Level, (fields: object, msg: string) => void>;

/**
 * `ctx.log` for what a transaction does: each line is written once `tx` has committed, and never
 * if it is rolled back. A line written at once told of a change the database then refused (a full
 * disk: `job requeued` at every sweep for a job that stayed claimed, `job stopped` for a stop
 * answered 503), and a PostgreSQL transaction run again wrote its lines once per attempt.
 */
export function txLog(ctx: CoreContext, tx: Tx): TxLogger {
  return new TxLog(ctx.log, tx);
}

/** (Methods on a prototype: a call of txLog makes one small object, not four closures.) */
class TxLog implements TxLogger {
  constructor(
    private readonly log: Logger,
    private readonly tx: Tx,
  ) {}
  #at(level: Level, fields: object, msg: string): void {
    const log = this.log;
    if (log.isLevelEnabled(level)) this.tx.afterCommit(() => log[level](fields, msg));
  }
  debug(fields: object, msg: string): void {
    this.#at('debug', fields, msg);
  }
  info(fields: object, msg: string): void {
    this.#at('info', fields, msg);
  }
  warn(fields: object, msg: string): void {
    this.#at('warn', fields, msg);
  }
  error(fields: object, msg: string): void {
    this.#at('error', fields, msg);
  }
}

import { isTerminal, type CompletedReport, type FailedReport, type JobStatus, type StartedReport, type StoppedReport } from '@agentq/protocol';
import { liveLauncher, mustJob, transition, txLog, type CoreContext } from './context.js';
import { CoordinatorError } from './errors.js';
import { end, stoppedStatus } from './jobs.js';
import { normalizeDir } from './routing.js';
import { isDelivery, type JobPatch, type JobRow, type LauncherRow } from './rows.js';
import type { Tx } from './store/store.js';

/*
 * A launcher's reports on the jobs it holds: started, completed, failed, stopped. Each is
 * idempotent (a retried report that was already applied answers ok and changes nothing).
 */

export type ReportKind = 'started' | 'completed' | 'failed' | 'stopped';
export type ReportBody = Omit<StartedReport & CompletedReport & FailedReport & StoppedReport, 'launcher_id' | 'status' | 'error'> & {
  error?: string | null;
};

/** A report's job: the launcher must be live (401) and hold it (409). */
export async function heldJob(tx: Tx, launcherId: string, jobId: string): Promise<{ job: JobRow; launcher: LauncherRow }> {
  const launcher = await liveLauncher(tx, launcherId);
  const job = await mustJob(tx, jobId);
  if (job.launcherId !== launcher.id) {
    throw new CoordinatorError('job_owned_by_other_launcher', `job ${job.id} is ${job.status} and not held by launcher ${launcher.id}`, {
      job_id: job.id,
      current_status: job.status,
      launcher_id: job.launcherId,
    });
  }
  return { job, launcher };
}

/** The report's usage and cost, added to `patch`. */
function accounting(b: ReportBody, patch: JobPatch): JobPatch {
  if (b.usage) patch.usage = b.usage;
  if (b.cost_usd !== undefined) patch.costUsd = b.cost_usd;
  if (b.num_turns !== undefined) patch.numTurns = b.num_turns;
  if (b.duration_api_ms !== undefined) patch.durationApiMs = b.duration_api_ms;
  return patch;
}

export async function report(ctx: CoreContext, tx: Tx, kind: ReportKind, jobId: string, launcherId: string, body: ReportBody): Promise<void> {
  let { job, launcher } = await heldJob(tx, launcherId, jobId);
  // not from a report repeated after its job ended: a later job of the session may have set its own
  if (body.executor_session_id && !isTerminal(job.status)) job = await setExecutorSession(tx, job, body.executor_session_id);
  const target: JobStatus = kind === 'started' ? 'running' : kind === 'stopped' ? stoppedStatus(job.stopReason) : kind;
  if (job.status === target) return; // a repeated report: already applied
  // a repeated `started` of a job that has ended since (a report-and-poll request sent again
  // after its answer was lost carries it with the final report): it was applied
  if (kind === 'started' && job.startedAt !== null && isTerminal(job.status)) return;
  if (kind === 'started') {
    // running (unless a stop request is on its way: the stop still stands) and, the first time,
    // when it started: one new version of the row
    const patch: JobPatch = job.status !== 'stopping' ? transition(job, 'running', tx.now) : {};
    const first = job.startedAt === null;
    if (first) patch.startedAt = tx.now;
    if (first || patch.status !== undefined) job = await tx.updateJob(job.id, patch);
    if (first) {
      txLog(ctx, tx).info({ job_id: job.id, launcher_id: launcher.id }, 'job started');
      await bindSession(ctx, tx, job, launcher, body.working_dir ?? null);
      tx.emit('job.started', { job: job.id });
    }
    return;
  }
  if (kind === 'completed') {
    await end(ctx, tx, job, 'completed', accounting(body, { result: body.result ?? null, error: null }));
  } else if (kind === 'failed') {
    await end(ctx, tx, job, 'failed', accounting(body, { error: body.error ?? 'failed', errorCode: body.error_code ?? null }));
  } else {
    const how = body.signal ? ` (executor ended by ${body.signal})` : '';
    // a delivery's timeout counts from its claim (jobs.ts claim): say how long it had from there
    const allowed = isDelivery(job) && job.claimedAt !== null && job.timeoutMs !== null ? job.timeoutMs - (job.claimedAt - job.createdAt) : job.timeoutMs;
    const error = body.error ?? (job.stopReason === 'timeout' ? `timed out after ${allowed} ms${how}` : `stopped by request${how}`);
    await end(ctx, tx, job, target, accounting(body, { error }));
  }
}

async function setExecutorSession(tx: Tx, job: JobRow, executorSessionId: string): Promise<JobRow> {
  const session = (await tx.session(job.sessionName))!;
  if (session.executorSessionId !== executorSessionId) {
    await tx.updateSession(session.name, { executorSessionId });
    tx.emit('session.updated', { session: session.name });
  }
  return job.executorSessionId === executorSessionId ? job : tx.updateJob(job.id, { executorSessionId });
}

/**
 * The session's first job started: from now on it lives on this launcher's host, in this
 * directory, with this executor. A session of a portable executor (or of a launcher with no host
 * identity) may go on anywhere, but only with the same executor type: another one could not
 * continue its conversation (a `claude --resume` of a demo session's id).
 */
async function bindSession(ctx: CoreContext, tx: Tx, job: JobRow, launcher: LauncherRow, workingDir: string | null): Promise<void> {
  const session = (await tx.session(job.sessionName))!;
  if (session.affinity) return;
  if (launcher.portable || launcher.hostId === null) {
    if (launcher.executorType === null) return;
    await tx.updateSession(session.name, { affinity: { hostId: null, hostname: null, executorType: launcher.executorType, workingDir: null } });
    txLog(ctx, tx).info({ session_name: session.name, launcher_id: launcher.id, executor_type: launcher.executorType }, 'session bound to its executor type');
    tx.emit('session.updated', { session: session.name });
    return;
  }
  const dir = workingDir ?? job.projectDir ?? launcher.roots[0] ?? null;
  const affinity = {
    hostId: launcher.hostId,
    hostname: launcher.hostname,
    executorType: launcher.executorType,
    workingDir: dir === null ? null : normalizeDir(dir),
  };
  await tx.updateSession(session.name, { affinity });
  txLog(ctx, tx).info({ session_name: session.name, launcher_id: launcher.id, host_id: launcher.hostId, working_dir: affinity.workingDir }, 'session bound to its host');
  tx.emit('session.updated', { session: session.name });
}

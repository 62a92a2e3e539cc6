import type { JobStatus, JobType, Labels } from '@agentq/protocol';
import { fitting, jobTextSize } from './answer-budget.js';
import { budgetExceeded } from './budget.js';
import * as callbacks from './callbacks.js';
import { transition, txLog, type CoreContext } from './context.js';
import { newId } from './ids.js';
import { routeKey, routeOf } from './routing.js';
import { addUsage, isDelivery, type JobPatch, type JobRow, type LauncherRow, type SessionPatch, type SessionRow, type StopCause } from './rows.js';
import type { Tx } from './store/store.js';

/*
 * The job lifecycle inside a transaction: a job is queued on its session, offered (made ready)
 * when it is first of an idle session, claimed, started, and ends; each step is one function.
 * Every status change goes through `transition` (context.ts), so through the table in the
 * protocol package.
 */

export interface NewJobFields {
  type: JobType;
  prompt: string;
  agentName: string | null;
  projectDir: string | null;
  timeoutMs: number | null;
  requires: Labels | null;
  maxCostUsd: number | null;
  createdBy: string | null;
  callbackOf: string[] | null;
  messageIds: string[] | null;
}

/** A job as it is created: pending on `session`, every field it does not name at its start value. */
export function newJobRow(seq: number, id: string, session: Pick<SessionRow, 'name' | 'parentName'>, now: number, f: NewJobFields): JobRow {
  return {
    seq,
    id,
    type: f.type,
    sessionName: session.name,
    agentName: f.agentName,
    prompt: f.prompt,
    projectDir: f.projectDir,
    parentSessionName: session.parentName,
    createdAt: now,
    timeoutMs: f.timeoutMs,
    callbackOf: f.callbackOf,
    messageIds: f.messageIds,
    requires: f.requires && Object.keys(f.requires).length > 0 ? f.requires : null,
    maxCostUsd: f.maxCostUsd,
    createdBy: f.createdBy,
    status: 'pending',
    launcherId: null,
    error: null,
    errorCode: null,
    result: null,
    claimedAt: null,
    startedAt: null,
    completedAt: null,
    updatedAt: now,
    stopRequestedAt: null,
    stopReason: null,
    stoppedBy: null,
    stopPending: false,
    executorSessionId: null,
    attempts: 0,
    lostClaims: 0,
    usage: null,
    costUsd: null,
    numTurns: null,
    durationApiMs: null,
    readySince: null,
    routeKey: null,
    outputBytes: 0,
    agentTokenHash: null,
  };
}

/** Queue a new job on `session` and offer it if the session is free. */
export async function enqueue(ctx: CoreContext, tx: Tx, session: SessionRow, f: NewJobFields): Promise<JobRow> {
  const seq = await tx.nextJobSeq();
  let id = newId('job_');
  // 48 random bits: a repeat is rare enough for a store that refuses one to run the transaction again
  if (!tx.refusesDuplicateJobIds) while (await tx.job(id)) id = newId('job_');
  const row = newJobRow(seq, id, session, tx.now, f);
  await tx.insertJob(row);
  await tx.updateSession(session.name, { updatedAt: tx.now });
  txLog(ctx, tx).debug({ job_id: id, session_name: session.name, type: f.type }, 'job created');
  tx.emit('job.created', { job: id });
  tx.emit('session.updated', { session: session.name });
  await offerNext(tx, session.name);
  return (await tx.job(id))!;
}

/** Make the session's first pending job claimable, if the session has no active job. */
export async function offerNext(tx: Tx, sessionName: string): Promise<void> {
  if (await tx.activeJobOf(sessionName)) return;
  const [head] = await tx.pendingJobsOf(sessionName);
  if (!head || head.readySince !== null) return;
  const session = (await tx.session(sessionName))!;
  await tx.updateJob(head.id, { readySince: tx.now, routeKey: routeKey(routeOf(head, session)) });
}

/**
 * A delivery's timeout as a launcher takes it: JOB_DEFAULT_TIMEOUT_MS from now (as it is now: one
 * turned off since the delivery was queued is off for it too), counted from its creation.
 */
const deliveryTimeout = (job: JobRow, now: number, defaultMs: number | null): number | null =>
  defaultMs === null ? null : now - job.createdAt + defaultMs;

/** Claim up to `max` ready jobs for `launcher`, oldest first among those it may take. */
export async function claim(ctx: CoreContext, tx: Tx, launcher: LauncherRow, max: number): Promise<JobRow[]> {
  const claimed: JobRow[] = [];
  for (;;) {
    const ready = await tx.readyJobsFor(launcher, max - claimed.length, ctx.config.maxAnswerBytes);
    // one answer carries at most MAX_ANSWER_BYTES of prompts (the first job always): a launcher
    // asking for 1,000 slots over 1 MiB prompts would be handed a 1 GiB answer, built in one turn
    // of the event loop. It takes the rest at its next poll; those left here stay ready.
    const room = ctx.config.maxAnswerBytes - claimedBytes(claimed);
    const fit = fitting(ready, room, jobTextSize);
    ready.length = claimed.length > 0 && fit.size > room ? 0 : fit.count;
    let refused = 0;
    for (const job of ready) {
      const session = (await tx.session(job.sessionName))!;
      // queued before its tree spent its budget: it does not run now (new jobs are refused)
      // without a lock on the root: a claim waits for no lock (store/pg-tx.ts)
      const spent = await budgetExceeded(tx, session, { unlocked: true });
      if (spent) {
        await end(ctx, tx, job, 'failed', { error: `${spent.message}: this job, queued before, was not run`, errorCode: 'budget_exceeded' });
        refused++;
        continue;
      }
      const { status, updatedAt } = transition(job, 'claimed', tx.now);
      const patch: JobPatch = {
        status,
        updatedAt,
        launcherId: launcher.id,
        claimedAt: tx.now,
        attempts: job.attempts + 1,
        readySince: null,
        routeKey: null,
        executorSessionId: job.type === 'resume_session' ? session.executorSessionId : job.executorSessionId,
        // a job of a session bound to a host runs where the session lives (docs/routing.md)
        projectDir: session.affinity?.workingDir ?? job.projectDir ?? null,
      };
      // a delivery's timeout counts from when a launcher takes it: no client waits on it, and it
      // may have waited for its session's host for hours (docs/routing.md)
      if (isDelivery(job)) patch.timeoutMs = deliveryTimeout(job, tx.now, ctx.config.defaultJobTimeoutMs);
      const row = await tx.updateJob(job.id, patch);
      txLog(ctx, tx).debug({ job_id: job.id, launcher_id: launcher.id }, 'job claimed');
      tx.emit('job.claimed', { job: job.id });
      claimed.push(row);
    }
    // the places of jobs that ended instead go to the next ready ones (ended jobs are ready no more)
    if (refused === 0 || claimed.length >= max || ready.length === 0) return claimed;
  }
}

const claimedBytes = (jobs: readonly JobRow[]) => jobs.reduce((n, j) => n + jobTextSize(j), 0);

/** A claimed job that never started goes back to its creation-order place in the queue. */
export async function requeue(ctx: CoreContext, tx: Tx, job: JobRow, why: string, patch: JobPatch = {}): Promise<void> {
  txLog(ctx, tx).warn({ job_id: job.id, launcher_id: job.launcherId }, `job requeued: ${why}`);
  await tx.updateJob(job.id, { ...patch, ...transition(job, 'pending', tx.now), launcherId: null, claimedAt: null, stopPending: false });
  tx.emit('job.requeued', { job: job.id });
  await offerNext(tx, job.sessionName);
}

/**
 * A claim ended without a start (its lease expired, or its launcher was lost): the job goes back
 * to the queue, unless it has been claimed JOB_MAX_CLAIMS times, every one lost so: then it fails
 * (`claim_attempts_exhausted`) instead of being handed to launcher after launcher for ever (a
 * poison job whose claim crashes its launcher would take every launcher down in turn). Counted
 * on `lostClaims`, not `attempts`: `attempts` also counts claims whose answer was never written
 * (claims.ts) and claims a coordinator restart took back (recovery.ts), which say nothing of the job.
 */
export async function loseClaim(ctx: CoreContext, tx: Tx, job: JobRow, why: string): Promise<void> {
  const max = ctx.config.maxClaims;
  const lost = job.lostClaims + 1;
  if (lost < max) return requeue(ctx, tx, job, why, { lostClaims: lost });
  const error =
    `${lost} claims lost without a start (JOB_MAX_CLAIMS ${max}; claimed ${job.attempts} times in all); ` +
    `the last: ${why}`;
  txLog(ctx, tx).error({ job_id: job.id, launcher_id: job.launcherId, attempts: job.attempts, lost_claims: lost }, 'job failed: claim attempts exhausted');
  await end(ctx, tx, job, 'failed', { error, errorCode: 'claim_attempts_exhausted', lostClaims: lost });
}

/** Ask the launcher holding the job to stop it (told on its next poll, or at once if parked). */
export async function requestStop(ctx: CoreContext, tx: Tx, job: JobRow, reason: StopCause, by: string | null): Promise<JobRow> {
  const row = await tx.updateJob(job.id, {
    ...transition(job, 'stopping', tx.now),
    stopRequestedAt: tx.now,
    stopReason: reason,
    stoppedBy: by,
    stopPending: job.launcherId !== null,
  });
  txLog(ctx, tx).info({ job_id: job.id, launcher_id: job.launcherId, reason }, 'job stopping');
  tx.emit('job.stopping', { job: job.id });
  return row;
}

/** How a stopped job ends: `timed_out` when the stop was its timeout, else `stopped`. */
export const stoppedStatus = (reason: StopCause | null): 'stopped' | 'timed_out' =>
  reason === 'timeout' ? 'timed_out' : 'stopped';

/** A pending job ends without running (stopped or timed out). */
export async function endPending(
  ctx: CoreContext,
  tx: Tx,
  job: JobRow,
  reason: StopCause,
  by: string | null,
): Promise<JobRow> {
  const row = await tx.updateJob(job.id, {
    ...transition(job, stoppedStatus(reason), tx.now),
    stopRequestedAt: tx.now,
    stopReason: reason,
    stoppedBy: by,
    readySince: null,
    routeKey: null,
    error: reason === 'timeout' ? `timed out after ${job.timeoutMs} ms before a launcher took it` : 'stopped before it was claimed',
  });
  await finish(ctx, tx, row);
  return row;
}

/** What every job that ends is no longer: ready, or owed a stop. */
const ENDED: JobPatch = Object.freeze({ readySince: null, routeKey: null, stopPending: false });

/** End a job now with `status` (the patch carries error, result, usage, ...). */
export async function end(
  ctx: CoreContext,
  tx: Tx,
  job: JobRow,
  status: JobStatus,
  patch: Partial<JobRow> = {},
): Promise<JobRow> {
  // (not one literal of spreads: see JobPatch)
  const row = await tx.updateJob(job.id, Object.assign({}, patch, transition(job, status, tx.now), ENDED));
  await finish(ctx, tx, row);
  return row;
}

/** Everything that follows a job reaching a terminal status. */
async function finish(ctx: CoreContext, tx: Tx, job: JobRow): Promise<void> {
  const session = (await tx.session(job.sessionName))!;
  // a start that ended while no launcher held it (never claimed, or given back to the queue
  // after a lapsed claim or a restart, whose launcher was refused at `started`), or that its
  // launcher refused before running it (a project_dir missing on that host, or outside its
  // roots) without naming a conversation: there is none anywhere to continue
  const neverStarted =
    job.type === 'start_session' &&
    job.status !== 'completed' &&
    (job.launcherId === null || (job.startedAt === null && session.executorSessionId === null));
  // (one object, fields added to it: not a literal of conditional spreads, see JobPatch)
  const patch: SessionPatch = { lastJobStatus: job.status, updatedAt: tx.now, lastError: job.error };
  if (job.status === 'completed') patch.lastResult = job.result;
  if (job.usage || job.costUsd !== null) {
    patch.usage = addUsage(session.usage, job.usage);
    patch.costUsd = session.costUsd + (job.costUsd ?? 0);
  }
  // a session whose conversation never began has nothing to continue
  if (neverStarted) patch.acceptsInput = false;
  await tx.updateSession(session.name, patch);
  if (job.usage || job.costUsd !== null) await addToTree(tx, session, job);

  const level = job.status === 'completed' ? 'info' : 'warn';
  txLog(ctx, tx)[level](
    { job_id: job.id, launcher_id: job.launcherId, status: job.status, error: job.error, error_code: job.errorCode },
    `job ${job.status}`,
  );
  tx.emit(`job.${job.status}` as 'job.completed', { job: job.id });

  await callbacks.jobEnded(ctx, tx, session.name, job);
  if (job.parentSessionName !== null) await callbacks.childEnded(ctx, tx, job);
  // the resumes queued behind that start (sent while it waited) have no conversation to
  // continue either: they end now, as a resume sent from now on is refused (session_closed)
  if (neverStarted) {
    const queued = await tx.pendingJobsOf(session.name);
    for (const resume of queued) {
      await end(ctx, tx, resume, 'failed', {
        error: `session ${session.name} is closed: its start job ${job.id} ended ${job.status} before any launcher ran it, so there is no conversation to continue`,
        errorCode: 'session_closed',
      });
    }
    // the session's summary tells why it closed (the start's status and error), not the last of
    // the resumes that closing ended
    if (queued.length > 0) await tx.updateSession(session.name, { lastJobStatus: job.status, lastError: job.error });
  }
  await offerNext(tx, session.name);
  await callbacks.deliver(ctx, tx, session.name);
  tx.emit('session.updated', { session: session.name });

  if (job.launcherId !== null) {
    const launcher = await tx.launcher(job.launcherId);
    if (launcher?.status === 'deregistering' && (await tx.activeJobsOfLauncher(launcher.id)).length === 0) {
      await tx.deleteLauncher(launcher.id);
      txLog(ctx, tx).info({ launcher_id: launcher.id }, 'launcher removed: it finished its jobs after deregistration');
      tx.emit('launcher.removed', { launcher: launcher.id });
    }
  }
}

/** Add a job's usage and cost to the tree sums of its session and every ancestor. */
async function addToTree(tx: Tx, session: SessionRow, job: JobRow): Promise<void> {
  for (let s: SessionRow | undefined = session; s; s = s.parentName === null ? undefined : await tx.session(s.parentName)) {
    await tx.updateSession(s.name, {
      treeUsage: addUsage(s.treeUsage, job.usage),
      treeCostUsd: s.treeCostUsd + (job.costUsd ?? 0),
    });
    if (s !== session) tx.emit('session.updated', { session: s.name });
  }
}

import type { PollResponse } from '@agentq/protocol';
import { agentTokensEnabled, mintAgentToken } from './agent-tokens.js';
import type { CoreContext } from './context.js';
import { claim, requeue } from './jobs.js';
import type { LauncherRow } from './rows.js';
import type { Tx } from './store/store.js';
import { toWireJob } from './wire.js';

/*
 * What a poll is answered with, in one transaction: the stop requests its launcher has not been
 * told yet, and the deregistration notice, else (with capacity) the oldest jobs it may take.
 *
 * `stopsAlone`: the poll is of the original API's shape (`GET /launcher/jobs` without
 * `batch=true`), whose answers are one kind each: launchers written for it read `deregistered`,
 * then `stop_jobs`, and only then `job`. A job given beside stop requests would be dropped by
 * them, left claimed until its lease expired; so stop requests go alone, and the launcher's next
 * poll, which follows at once, takes the job.
 */

export async function answerPoll(
  ctx: CoreContext,
  tx: Tx,
  launcher: LauncherRow | undefined,
  capacity: number,
  stopsAlone = false,
): Promise<PollResponse | null> {
  // a launcher that is gone (removed while its poll was parked) is told it is deregistered
  if (!launcher) return { deregistered: true };
  if (launcher.status === 'stale') return null;
  const answer: PollResponse = {};
  // a deregistering launcher lets its running jobs finish: a stop of one of them must still reach
  // it, on the answers to its reports (it no longer polls; its heartbeat is the safety net)
  const stops = await tx.pendingStopsOf(launcher.id);
  if (stops.length > 0) {
    for (const job of stops) await tx.updateJob(job.id, { stopPending: false });
    answer.stop_jobs = stops.map((j) => j.id);
  }
  if (launcher.status === 'deregistering') return { ...answer, deregistered: true };
  if (capacity > 0 && !(stopsAlone && answer.stop_jobs)) {
    const jobs = await claim(ctx, tx, launcher, capacity);
    if (jobs.length > 0) {
      answer.jobs = jobs.map((j) => toWireJob(j));
      answer.job = answer.jobs[0];
      // each job's own credential for its agent, beside the jobs (never on the Job object)
      if (agentTokensEnabled(ctx.config)) {
        const tokens: Record<string, string> = {};
        for (const j of jobs) tokens[j.id] = await mintAgentToken(tx, j);
        answer.agent_tokens = tokens;
      }
    }
  }
  return answer.stop_jobs || answer.jobs ? answer : null;
}

/**
 * A poll answer could not be written (the launcher's connection closed first): undo what giving
 * it out did. Claimed jobs go back to their place in the queue; stop requests wait for the next
 * poll; a deregistration notice stays due (the launcher is still `deregistering`).
 */
export async function undoAnswer(ctx: CoreContext, tx: Tx, launcherId: string, answer: PollResponse): Promise<void> {
  const jobs = answer.jobs ?? (answer.job ? [answer.job] : []);
  for (const w of jobs) await releaseUndelivered(ctx, tx, w.job_id, launcherId, w.attempts);
  for (const id of answer.stop_jobs ?? []) {
    const job = await tx.job(id);
    if (job?.status === 'stopping' && job.launcherId === launcherId) await tx.updateJob(id, { stopPending: true });
  }
}

/**
 * The answer carrying a claimed job never reached the launcher: it goes back to the queue. Only
 * that claim (`attempts` as the answer carried it): an undo that comes late, after the job went
 * back and the same launcher claimed it again in an answer that was delivered, leaves it alone.
 * (`attempts` keeps counting it, as this check needs; it is not a lost claim for JOB_MAX_CLAIMS,
 * which counts `lostClaims`: the launcher never had the job.)
 */
async function releaseUndelivered(ctx: CoreContext, tx: Tx, jobId: string, launcherId: string, attempts: number): Promise<void> {
  const job = await tx.job(jobId);
  if (job && job.status === 'claimed' && job.launcherId === launcherId && job.attempts === attempts && job.startedAt === null) {
    await requeue(ctx, tx, job, 'the poll answer carrying it was not delivered');
  }
}

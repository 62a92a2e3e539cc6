import { isTerminal, type Job, type WaitManyResponse } from '@agentq/protocol';
import { fitting, jobTextSize, type AnswerRoom } from './answer-budget.js';
import type { CoreContext } from './context.js';
import { jobNotFound } from './errors.js';
import type { JobWatchers } from './job-watchers.js';
import { wireJob } from './pending-reasons.js';
import type { JobRow } from './rows.js';

/*
 * Waiting on jobs (`GET /jobs/{id}/wait`, `POST /jobs/wait`, output follow). Each wait re-reads
 * the store when a commit ends one of its jobs (JobWatchers), so it sees what any coordinator
 * sharing the store did; the server closing answers it with what it has.
 */

/** Resolve with the job once it is terminal, or its snapshot when `timeoutMs` passes. */
export async function waitJob(
  ctx: CoreContext,
  watchers: JobWatchers,
  jobId: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<Job> {
  let job: JobRow | undefined;
  await waitUntil(watchers, [jobId], timeoutMs, signal, async () => {
    job = await ctx.store.getJob(jobId);
    if (!job) throw jobNotFound(jobId);
    return isTerminal(job.status);
  });
  return wireJob(ctx, job!);
}

/**
 * `all`: until every watched job is terminal. `any`: until one of the watched jobs that were
 * still active when the wait began ends; at once if none was. A job that had already ended does
 * not satisfy it (so a caller can wait again on the same ids) unless `includeTerminal`.
 */
export async function waitJobs(
  ctx: CoreContext,
  watchers: JobWatchers,
  room: AnswerRoom,
  jobIds: readonly string[],
  timeoutMs: number,
  mode: 'any' | 'all',
  signal?: AbortSignal,
  includeTerminal = false,
): Promise<WaitManyResponse> {
  const unique = [...new Set(jobIds)];
  // each check reads statuses and sizes only: a wait on many jobs with large prompts would read
  // them all again after every commit that ends one of them (PostgreSQL: from the server)
  const read = async () => {
    const briefs = new Map((await ctx.store.jobBriefs(unique)).map((b) => [b.id, b]));
    return unique.map((id) => briefs.get(id)).filter((b) => b !== undefined);
  };
  let found = await read();
  const open = new Set(found.filter((j) => includeTerminal || !isTerminal(j.status)).map((j) => j.id));
  const met = () => {
    if (found.length === 0) return false;
    const watched = found.filter((j) => open.has(j.id));
    if (mode === 'any') return watched.length === 0 || watched.some((j) => isTerminal(j.status));
    return watched.every((j) => isTerminal(j.status));
  };
  let first = true;
  await waitUntil(watchers, [...open], found.length > 0 ? timeoutMs : 0, signal, async () => {
    if (!first) found = await read();
    first = false;
    return met();
  });
  // past MAX_ANSWER_BYTES of text (or what the answers in flight leave) the rest are named, not
  // sent (answer-budget.ts); the jobs that ended come first, since they are what the caller waited
  // for; the answer keeps request order
  const byInterest = [...found.filter((j) => isTerminal(j.status)), ...found.filter((j) => !isTerminal(j.status))];
  // a caller that has gone gets nothing built (its answer would not be sent); the others' jobs
  // are read whole only as far as their sizes fit in one answer
  const chosen = signal?.aborted ? [] : byInterest.slice(0, fitting(byInterest, ctx.config.maxAnswerBytes, (b) => b.size).count);
  const whole = new Map((await Promise.all(chosen.map((b) => ctx.store.getJob(b.id)))).filter((j) => j !== undefined).map((j) => [j.id, j]));
  // the answer says what those whole rows say: a job deleted since its brief (history retention)
  // is not found, one that ended since counts as ended
  const gone = new Set(chosen.filter((b) => !whole.has(b.id)).map((b) => b.id));
  found = found.filter((b) => !gone.has(b.id)).map((b) => ({ ...b, status: whole.get(b.id)?.status ?? b.status }));
  const rows = chosen.filter((b) => !gone.has(b.id)).map((b) => whole.get(b.id)!);
  const sent = new Map(rows.slice(0, room.take(rows, jobTextSize) ?? 0).map((j) => [j.id, j]));
  const present = new Set(found.map((b) => b.id));
  return {
    mode,
    done: met(),
    jobs: await Promise.all(found.filter((b) => sent.has(b.id)).map((b) => wireJob(ctx, sent.get(b.id)!))),
    not_found: unique.filter((id) => !present.has(id)),
    omitted: found.filter((b) => !sent.has(b.id)).map((b) => b.id),
  };
}

/**
 * Wait up to `waitMs` for output past what `job` had, or for the job to end, whichever comes
 * first; returns the job as it is then.
 */
export async function waitForOutput(
  ctx: CoreContext,
  watchers: JobWatchers,
  job: JobRow,
  waitMs: number,
  signal?: AbortSignal,
): Promise<JobRow> {
  const { store } = ctx;
  const done = new AbortController();
  const both = signal ? AbortSignal.any([signal, done.signal]) : done.signal;
  const outputCame = store.whenOutput(job.id, both, job.outputBytes);
  const ended = watchers.next([job.id], waitMs, both);
  await Promise.race([outputCame, ended]);
  done.abort();
  return (await store.getJob(job.id)) ?? job;
}

/** Wait (real time) until `check` holds, re-checking after each commit that ends one of `ids`. */
async function waitUntil(
  watchers: JobWatchers,
  ids: readonly string[],
  timeoutMs: number,
  signal: AbortSignal | undefined,
  check: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    const remaining = deadline - Date.now();
    if (remaining <= 0 || watchers.closed || signal?.aborted) return;
    const cancel = new AbortController();
    const wake = watchers.next(ids, remaining, signal ? AbortSignal.any([signal, cancel.signal]) : cancel.signal);
    // an end committed between the check and the registration is not missed: check again
    if (await check()) {
      cancel.abort();
      return;
    }
    await wake;
    cancel.abort();
  }
}

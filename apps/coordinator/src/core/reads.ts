import {
  isTerminal,
  type Job,
  type JobList,
  type JobOutput,
  type LauncherList,
  type ListLaunchersQuery,
  type ListSessionsQuery,
  type OutputQuery,
  type Session,
  type SessionList,
} from '@agentq/protocol';
import { jobTextSize, launcherTextSize, sessionTextSize, type AnswerRoom } from './answer-budget.js';
import type { CoreContext } from './context.js';
import { CoordinatorError, jobNotFound, validation } from './errors.js';
import type { JobWatchers } from './job-watchers.js';
import { pendingReasons, wireJob } from './pending-reasons.js';
import type { LauncherRow } from './rows.js';
import type { LauncherKey, ListJobsFilter } from './store/store.js';
import { waitForOutput } from './waits.js';
import { toWireJob, toWireLauncher, toWireSession } from './wire.js';

/*
 * What the read endpoints answer: a job, a session, a job's output, pages of jobs and sessions
 * (newest first, a page's `next_cursor` being the seq of its last row), and pages of launchers
 * (registration order, a page's `next_cursor` naming its last launcher's place in it).
 */

export async function getJob(ctx: CoreContext, jobId: string): Promise<Job> {
  const job = await ctx.store.getJob(jobId);
  if (!job) throw jobNotFound(jobId);
  return wireJob(ctx, job);
}

/** `cursor` is the `next_cursor` of the previous page. */
export type ListJobsQuery = Omit<ListJobsFilter, 'limit' | 'before'> & { limit: number; cursor?: number };

export async function listJobs(ctx: CoreContext, filter: ListJobsQuery, room: AnswerRoom): Promise<JobList> {
  const { cursor, ...rest } = filter;
  // no room at all: say so before reading (on PostgreSQL a page of large rows is a large read)
  if (room.noRoom()) answersBusy();
  const { rows, cut } = await ctx.store.listJobs({
    ...rest,
    limit: filter.limit + 1,
    maxBytes: ctx.config.maxAnswerBytes,
    ...(cursor !== undefined ? { before: cursor } : {}),
  });
  // up to `limit` rows, fewer once they carry MAX_ANSWER_BYTES of text, or what the answers in
  // flight leave of MAX_ANSWER_BYTES_IN_FLIGHT (answer-budget.ts)
  const n = room.take(rows, jobTextSize, filter.limit) ?? answersBusy();
  const more = n < rows.length || cut;
  rows.length = n;
  const reasons = await pendingReasons(ctx, rows);
  return {
    jobs: rows.map((r) => toWireJob(r, reasons.get(r.id) ?? null)),
    next_cursor: more ? String(rows[rows.length - 1]!.seq) : null,
  };
}

/** A job's output: its tail, or from `offset` (then waiting up to `wait_ms` for more, if asked). */
export async function readOutput(
  ctx: CoreContext,
  watchers: JobWatchers,
  jobId: string,
  q: OutputQuery,
  signal?: AbortSignal,
): Promise<JobOutput> {
  const { store, config } = ctx;
  // a parameter of the other way to read would be ignored: `wait_ms` without an offset would
  // answer at once, and a client that meant to wait would poll in a tight loop
  if (q.offset === undefined) {
    for (const field of ['wait_ms', 'limit_bytes'] as const) {
      if (q[field] !== undefined) throw validation(field, 'needs offset (without it, the last tail_bytes are read)', 'querystring');
    }
  } else if (q.tail_bytes !== undefined) {
    throw validation('tail_bytes', 'cannot be used with offset (use limit_bytes)', 'querystring');
  }
  let job = await store.getJob(jobId);
  if (!job) throw jobNotFound(jobId);
  if (q.offset !== undefined && q.offset >= job.outputBytes && !isTerminal(job.status) && (q.wait_ms ?? 0) > 0) {
    job = await waitForOutput(ctx, watchers, job, q.wait_ms!, signal);
  }
  const out =
    q.offset === undefined
      ? await store.readOutput(jobId, null, q.tail_bytes ?? config.outputPreviewBytes)
      : await store.readOutput(jobId, q.offset, q.limit_bytes ?? config.outputMaxBytes);
  return {
    job_id: job.id,
    status: job.status,
    terminal: isTerminal(job.status),
    output: out.text,
    offset: out.offset,
    next_offset: out.end,
    total_bytes: out.totalBytes,
    retained_bytes: out.retainedBytes,
    truncated: out.truncated,
  };
}

/**
 * A list's `cursor` parameter (a page's `next_cursor`: decimal digits). An empty one is refused,
 * not read as 0 or as the first page: a client that sends `cursor=` when `next_cursor` was null
 * would otherwise get an empty list, or the first page again and again.
 */
export function parseCursor(cursor: string | undefined): number | undefined {
  if (cursor === undefined) return undefined;
  if (cursor === '') throw validation('cursor', 'is empty: leave it out for the first page', 'querystring');
  const n = /^\d{1,16}$/.test(cursor) ? Number(cursor) : NaN;
  if (!Number.isSafeInteger(n)) throw validation('cursor', 'is not a cursor this server gave out', 'querystring');
  return n;
}

export async function listSessions(ctx: CoreContext, q: ListSessionsQuery, room: AnswerRoom): Promise<SessionList> {
  const before = parseCursor(q.cursor);
  const limit = q.limit ?? 100;
  // a root has no parent: both would always be an empty list, surely not what was meant
  if (q.root === 'true' && q.parent !== undefined) throw validation('root', 'cannot be true with parent: a root has no parent', 'querystring');
  if (room.noRoom()) answersBusy();
  const { rows, cut } = await ctx.store.listSessions({
    limit: limit + 1,
    maxBytes: ctx.config.maxAnswerBytes,
    ...(q.parent !== undefined ? { parent: q.parent } : {}),
    ...(q.root === 'true' ? { root: true } : {}),
    ...(q.status !== undefined ? { status: q.status } : {}),
    ...(before !== undefined ? { before } : {}),
  });
  const extras = await ctx.store.sessionsExtras(rows.slice(0, limit));
  const n = room.take(rows, (s, i) => sessionTextSize(s, extras[i]!), limit) ?? answersBusy();
  const more = n < rows.length || cut;
  rows.length = n;
  const list = rows.map((s, i) => toWireSession(s, extras[i]!));
  return { sessions: list, next_cursor: more ? String(rows[rows.length - 1]!.seq) : null };
}

/** A page whose first row does not fit in what the answers in flight leave: come back soon. */
function answersBusy(): never {
  throw new CoordinatorError('overloaded', 'answers in flight carry MAX_ANSWER_BYTES_IN_FLIGHT of text; retry after 1 s', {
    reason: 'answers_in_flight',
    retry_after_seconds: 1,
  });
}

export async function getSession(ctx: CoreContext, name: string): Promise<Session> {
  const s = await ctx.store.getSession(name);
  if (!s) throw new CoordinatorError('session_not_found', `session ${name} not found`, { session_name: name });
  return toWireSession(s, await ctx.store.sessionExtras(s));
}

/**
 * Launchers in registration order, a page after `q.cursor`; without `q.limit` every launcher from
 * there on (as the list was before it was paged: a client that does not know `next_cursor` is
 * never cut short). The cursor names the previous page's last launcher by its place in that
 * order (`<registered_at ms>.<launcher_id>`), so that a page goes on from there even if that
 * launcher has gone meanwhile: none is skipped or listed twice.
 *
 * A page (`q.limit`) ends early, as a page of jobs or sessions does, once its launchers' text
 * (labels, project roots: launcherTextSize) passes MAX_ANSWER_BYTES or what the answers in flight
 * leave of MAX_ANSWER_BYTES_IN_FLIGHT; `next_cursor` goes on from its last launcher. The unpaged
 * answer is neither cut nor counted: cutting it would leave a client that does not page without
 * the rest, unaware.
 */
export async function listLaunchers(ctx: CoreContext, q: ListLaunchersQuery, room: AnswerRoom): Promise<LauncherList> {
  const { store, clock } = ctx;
  const after = parseLauncherCursor(q.cursor);
  const limit = q.limit;
  // no room at all: say so before reading, as a list of jobs does
  if (limit !== undefined && room.noRoom()) answersBusy();
  const rows = await store.listLaunchers({
    ...(after !== undefined ? { after } : {}),
    ...(limit !== undefined ? { limit: limit + 1 } : {}),
  });
  const held = await store.activeJobIdsOfLaunchers((limit !== undefined ? rows.slice(0, limit) : rows).map((l) => l.id));
  const heldBy = (l: LauncherRow) => held.get(l.id) ?? [];
  let more = false;
  if (limit !== undefined) {
    const n = room.take(rows, (l) => launcherTextSize(l, heldBy(l)), limit) ?? answersBusy();
    more = n < rows.length;
    rows.length = n;
  }
  const now = clock.now();
  const last = rows.at(-1);
  return {
    launchers: rows.map((l) => toWireLauncher(l, heldBy(l), now)),
    next_cursor: more && last ? `${last.registeredAt}.${last.id}` : null,
  };
}

/** `GET /launchers`' cursor (a page's `next_cursor`: `<registered_at ms>.<launcher_id>`), refused as `parseCursor` refuses. */
export function parseLauncherCursor(cursor: string | undefined): LauncherKey | undefined {
  if (cursor === undefined) return undefined;
  if (cursor === '') throw validation('cursor', 'is empty: leave it out for the first page', 'querystring');
  const m = /^(\d{1,16})\.([A-Za-z0-9_-]{1,180})$/.exec(cursor);
  const registeredAt = m ? Number(m[1]) : NaN;
  if (!m || !Number.isSafeInteger(registeredAt)) throw validation('cursor', 'is not a cursor this server gave out', 'querystring');
  return { registeredAt, id: m[2]! };
}

import type { Job, StopJobResponse, StopOutcome, StopSessionResponse } from '@agentq/protocol';
import type { CoreContext } from './context.js';
import { mustJob } from './context.js';
import { afterChanges, CoordinatorError } from './errors.js';
import { requestHash, scopedKey, seenWith } from './idempotency.js';
import { wireJob } from './pending-reasons.js';
import type { IdempotencyRow, JobRow, StopCause, StopRecord } from './rows.js';
import * as sessions from './sessions.js';
import { toWireJob } from './wire.js';

/*
 * The stops clients ask for (`POST /jobs/{id}/stop`, `POST /sessions/{name}/stop`), with an
 * optional Idempotency-Key. A session stop names no jobs: sent again after its answer was lost,
 * it would stop whatever the session runs by then, such as a job a message or a child's outcome
 * started in between. With a key, the stop is made once: the same key (same token, same request,
 * within IDEMPOTENCY_TTL_MS) answers what the first one answered, `replayed: true`, and stops
 * nothing more. That includes a first answer of "nothing to stop" (404 session_not_found, 409
 * session_idle). A job stop names its job, so sending it again stops nothing more anyway; its key
 * gives the retry the first outcome (`stopped`) rather than what the job became since, and the job
 * as the first stop answered it once history retention has deleted it (the key outlives the job;
 * it keeps a bounded copy: keptJob).
 * A key answers only a finished stop: a tree stop that failed between its passes leaves its key
 * unfinished, and the same key carries out the passes that remain (see stopSession).
 */

/** Reads of a session tree while stopping it: a child started meanwhile is found by the next. */
const TREE_STOP_PASSES = 3;

/** The refusals of a session stop that say there was nothing to stop: answered again to a retry. */
const NOTHING_TO_STOP = new Set(['session_idle', 'session_not_found']);

export async function stopJob(
  ctx: CoreContext,
  jobId: string,
  reason: StopCause,
  by: string | null,
  idempotencyKey?: string,
): Promise<StopJobResponse> {
  const r = await ctx.store.transaction(async (tx): Promise<{ job: JobRow | Job; outcome: StopOutcome; replayed: boolean; cut?: true }> => {
    if (idempotencyKey === undefined) return { ...(await sessions.stopJob(ctx, tx, jobId, reason, by)), replayed: false };
    const key = scopedKey(by, idempotencyKey);
    const hash = requestHash({ stop: 'job', job_id: jobId });
    const seen = await seenWith(tx, key, hash, idempotencyKey);
    if (seen) {
      if (seen.answer?.stop !== 'job') throw unreadable(seen);
      // the job as it is now (as a create's replay answers it), with the first stop's outcome; a
      // job history retention deleted since (under the key's 24 h) as the first stop answered it
      const now = await tx.job(jobId);
      if (now || !seen.answer.job) return { job: now ?? (await mustJob(tx, jobId)), outcome: seen.answer.outcome, replayed: true };
      return { job: seen.answer.job, outcome: seen.answer.outcome, replayed: true, ...(seen.answer.cut ? { cut: true } : {}) };
    }
    const answer = await sessions.stopJob(ctx, tx, jobId, reason, by);
    // (no pending reason: a job just stopped is not pending)
    const kept = keptJob(toWireJob(answer.job));
    await tx.putIdempotency({ key, requestHash: hash, jobIds: [jobId], createdAt: tx.now, answer: { stop: 'job', outcome: answer.outcome, ...kept } });
    return { ...answer, replayed: false };
  });
  const job = 'job_id' in r.job ? r.job : await wireJob(ctx, r.job);
  return { job_id: job.job_id, outcome: r.outcome, status: job.status, job, ...(r.replayed ? { replayed: true } : {}), ...(r.cut ? { job_truncated: true } : {}) };
}

/** The most of each of a stopped job's texts (prompt, result, error) its key keeps, in characters. */
export const KEPT_JOB_TEXT = 512;
/** The most of each of its lists of ids (callback_of, message_ids) its key keeps. */
export const KEPT_JOB_IDS = 32;

/**
 * The copy of a stopped job its key keeps, answered only once history retention has deleted the
 * job (while it exists, a replay answers it as it is now). Bounded whatever the job: every keyed
 * stop makes a key, and a token that stops one job with a thousand keys must not store a thousand
 * copies of its 1 MiB prompt (and result) for the keys' 24 h. Its prompt, result and error are cut
 * to their first KEPT_JOB_TEXT characters and its id lists to their first KEPT_JOB_IDS; `cut` says
 * that something was (the replay answers `job_truncated: true`). The other fields are bounded by the
 * schemas of what set them.
 */
export function keptJob(job: Job): { job: Job; cut?: true } {
  let cut = false;
  const text = (s: string | null): string | null => {
    if (s === null || s.length <= KEPT_JOB_TEXT) return s;
    cut = true;
    // not half a surrogate pair
    const end = /[\uD800-\uDBFF]/.test(s[KEPT_JOB_TEXT - 1]!) ? KEPT_JOB_TEXT - 1 : KEPT_JOB_TEXT;
    return s.slice(0, end);
  };
  const ids = (a: string[] | null): string[] | null => {
    if (a === null || a.length <= KEPT_JOB_IDS) return a;
    cut = true;
    return a.slice(0, KEPT_JOB_IDS);
  };
  const kept: Job = {
    ...job,
    prompt: text(job.prompt)!,
    result: text(job.result),
    error: text(job.error),
    callback_of: ids(job.callback_of),
    message_ids: ids(job.message_ids),
  };
  return cut ? { job: kept, cut: true } : { job: kept };
}

type Stopped = StopSessionResponse['stopped'];
type Answers = Array<sessions.StopAnswer & { sessionName: string }>;

/** A session's key, while it is being stopped. */
interface Keyed {
  key: string;
  hash: string;
  idempotencyKey: string;
}

/** Stop everything the session is doing (`tree`: and every session under it). */
export async function stopSession(
  ctx: CoreContext,
  name: string,
  o: { by: string | null; tree: boolean; idempotencyKey?: string },
): Promise<StopSessionResponse> {
  const { by, tree } = o;
  const keyed: Keyed | undefined =
    o.idempotencyKey === undefined
      ? undefined
      : { key: scopedKey(by, o.idempotencyKey), hash: requestHash({ stop: 'session', session_name: name, tree }), idempotencyKey: o.idempotencyKey };
  const stopped: Stopped = [];
  const add = (answers: Answers) => {
    for (const a of answers) stopped.push({ job_id: a.job.id, outcome: a.outcome, status: a.job.status, session_name: a.sessionName });
  };

  // The tree is read before the transaction, so a child started meanwhile (by a turn not yet
  // stopped) is missed: read it again after each pass and stop what is new, until nothing is.
  let first: { answers: Answers } | { replay: IdempotencyRow } | { resume: IdempotencyRow };
  const names = tree ? await sessionTree(ctx, name) : [name];
  try {
    first = await ctx.store.transaction(async (tx) => {
      if (keyed) {
        const row = await seenWith(tx, keyed.key, keyed.hash, keyed.idempotencyKey);
        if (row) return unfinished(row) ? { resume: row } : { replay: row };
      }
      // the first pass answers 404 or 409 session_idle for the tree as a whole
      const answers: Answers = tree
        ? await sessions.stopTree(ctx, tx, names, by, true)
        : (await sessions.stopSession(ctx, tx, name, by)).map((a) => ({ ...a, sessionName: name }));
      // a tree stop is unfinished until its later passes are done: see below
      if (keyed) await tx.putIdempotency(record(keyed, tx.now, answers, { seen: tree ? names : undefined }));
      return { answers };
    });
  } catch (err) {
    if (!keyed || !(err instanceof CoordinatorError) || !NOTHING_TO_STOP.has(err.code)) throw err;
    // Nothing to stop is an answer too: a retry of it must not stop a job started since. Kept
    // in a transaction of its own, as the one that refused rolled back (a tree stop had begun
    // holding its sessions' deliveries).
    const row = await ctx.store.transaction(async (tx) => {
      const row = await seenWith(tx, keyed.key, keyed.hash, keyed.idempotencyKey);
      if (!row) {
        const refused = { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) };
        await tx.putIdempotency({ key: keyed.key, requestHash: keyed.hash, jobIds: [], createdAt: tx.now, answer: { stop: 'session', refused } });
      }
      return row;
    });
    // (another copy of this request got there first: its answer is the one)
    if (!row) throw err;
    first = unfinished(row) ? { resume: row } : { replay: row };
  }
  if ('replay' in first) return replaySession(ctx, name, first.replay);
  if (!tree) {
    if ('answers' in first) add(first.answers);
    return { session_name: name, stopped };
  }

  // A keyed tree stop records the sessions its passes have stopped, and that it is unfinished,
  // until the last pass: one that fails in between (a 503, the store) leaves the key unfinished,
  // and the same key sent again carries out the remaining passes, over the sessions of the tree
  // not stopped yet (rather than answering the first pass as the whole stop, leaving a child the
  // next pass would have found running). The sessions already stopped are not stopped again: a
  // job started there since (a message) is another request's to stop.
  // the first pass is committed: a later pass's failure (applied: false for that pass) is not this request's
  try {
    const seen = new Set('resume' in first ? unfinished(first.resume)!.seen : names);
    if ('answers' in first) add(first.answers);
    for (let pass = 1; pass < TREE_STOP_PASSES; pass++) {
      const fresh = (await sessionTree(ctx, name)).filter((n) => !seen.has(n));
      if (fresh.length === 0) break;
      const answers = await ctx.store.transaction(async (tx) => {
        if (!keyed) return sessions.stopTree(ctx, tx, fresh, by, false);
        const row = await tx.idempotency(keyed.key);
        const had = row && unfinished(row);
        // another copy of this request finished the stop meanwhile: nothing more is this stop's
        if (!had) return undefined;
        // (and the sessions another copy stopped meanwhile are not stopped again)
        const todo = fresh.filter((n) => !had.seen.includes(n));
        const answers = await sessions.stopTree(ctx, tx, todo, by, false);
        await tx.putIdempotency(record(keyed, row.createdAt, answers, { before: row, seen: [...had.seen, ...todo] }));
        return answers;
      });
      if (!answers) break;
      add(answers);
      for (const n of fresh) seen.add(n);
    }
    if (!keyed) return { session_name: name, stopped };
    const row = await ctx.store.transaction(async (tx) => {
      const row = await tx.idempotency(keyed.key);
      if (!row || !unfinished(row)) return row;
      const { unfinished: _, ...answer } = row.answer as Extract<StopRecord, { stopped: unknown }>;
      const done: IdempotencyRow = { ...row, answer };
      await tx.putIdempotency(done);
      return done;
    });
    if ('answers' in first) return { session_name: name, stopped };
    // A retry that finished the stop answers all of it, its first attempt's jobs with their first
    // outcome and status now; `replayed` only when this request stopped nothing more.
    const all = await replaySession(ctx, name, row ?? first.resume);
    if (stopped.length > 0) delete all.replayed;
    return all;
  } catch (err) {
    throw afterChanges(err);
  }
}

/** A tree stop's key between its passes (its record's `unfinished`), else undefined. */
function unfinished(row: IdempotencyRow): { readonly seen: readonly string[] } | undefined {
  const answer = row.answer;
  return answer?.stop === 'session' && 'stopped' in answer ? answer.unfinished : undefined;
}

/**
 * The key's row for what a session stop stopped (after what `before` had, for a tree's later
 * pass); `seen`: the sessions a tree stop has stopped so far, which leaves it unfinished.
 */
function record(keyed: Keyed, createdAt: number, answers: Answers, o: { before?: IdempotencyRow; seen?: readonly string[] | undefined }): IdempotencyRow {
  const before = o.before;
  const earlier = before?.answer?.stop === 'session' && 'stopped' in before.answer ? before.answer.stopped : [];
  return {
    key: keyed.key,
    requestHash: keyed.hash,
    jobIds: [...(before?.jobIds ?? []), ...answers.map((a) => a.job.id)],
    createdAt,
    answer: {
      stop: 'session',
      stopped: [...earlier, ...answers.map((a) => ({ outcome: a.outcome, status: a.job.status, session_name: a.sessionName }))],
      ...(o.seen ? { unfinished: { seen: [...o.seen] } } : {}),
    },
  };
}

/**
 * A session stop's first answer, again: the jobs it stopped, with the outcome it answered and
 * their status now (as a create's replay answers its job as it is now; a job deleted by history
 * retention since keeps the status it was answered with), or the refusal it answered.
 */
async function replaySession(ctx: CoreContext, name: string, row: IdempotencyRow): Promise<StopSessionResponse> {
  const answer = row.answer;
  if (answer?.stop !== 'session') throw unreadable(row);
  if ('refused' in answer) {
    throw new CoordinatorError(answer.refused.code, answer.refused.message, { ...answer.refused.details, replayed: true });
  }
  const now = new Map((await ctx.store.jobBriefs(row.jobIds)).map((b) => [b.id, b.status]));
  const stopped: Stopped = row.jobIds.map((id, i) => {
    const first = answer.stopped[i]!;
    return { job_id: id, outcome: first.outcome, status: now.get(id) ?? first.status, session_name: first.session_name };
  });
  return { session_name: name, stopped, replayed: true };
}

/** A key whose row does not hold the answer its request's hash says it should: not ours to guess. */
function unreadable(row: IdempotencyRow): Error {
  return new Error(`the Idempotency-Key row ${JSON.stringify(row.key)} holds no stop answer`);
}

/** The session and every session under it, parents before children (unknown: just the name). */
async function sessionTree(ctx: CoreContext, root: string): Promise<string[]> {
  const { store } = ctx;
  const names = new Set([root]);
  for (const name of names) {
    // every child, not the newest few a session's view lists
    for (const child of await store.childNames(name)) names.add(child);
  }
  return [...names];
}

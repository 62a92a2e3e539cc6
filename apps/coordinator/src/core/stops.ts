import type { StopOutcome, StopSessionResponse } from '@agentq/protocol';
import type { CoreContext } from './context.js';
import { mustJob } from './context.js';
import { CoordinatorError } from './errors.js';
import { requestHash, scopedKey, seenWith } from './idempotency.js';
import type { IdempotencyRow, JobRow, StopCause } from './rows.js';
import * as sessions from './sessions.js';

/*
 * The stops clients ask for (`POST /jobs/{id}/stop`, `POST /sessions/{name}/stop`), with an
 * optional Idempotency-Key. A session stop names no jobs: sent again after its answer was lost,
 * it would stop whatever the session runs by then, such as a job a message or a child's outcome
 * started in between. With a key, the stop is made once: the same key (same token, same request,
 * within IDEMPOTENCY_TTL_MS) answers what the first one answered, `replayed: true`, and stops
 * nothing more. That includes a first answer of "nothing to stop" (404 session_not_found, 409
 * session_idle). A job stop names its job, so sending it again stops nothing more anyway; its key
 * gives the retry the first outcome (`stopped`) rather than what the job became since.
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
): Promise<{ job: JobRow; outcome: StopOutcome; replayed: boolean }> {
  return ctx.store.transaction(async (tx) => {
    if (idempotencyKey === undefined) return { ...(await sessions.stopJob(ctx, tx, jobId, reason, by)), replayed: false };
    const key = scopedKey(by, idempotencyKey);
    const hash = requestHash({ stop: 'job', job_id: jobId });
    const seen = await seenWith(tx, key, hash, idempotencyKey);
    if (seen) {
      if (seen.answer?.stop !== 'job') throw unreadable(seen);
      // the job as it is now (as a create's replay answers it), with the first stop's outcome
      return { job: await mustJob(tx, jobId), outcome: seen.answer.outcome, replayed: true };
    }
    const answer = await sessions.stopJob(ctx, tx, jobId, reason, by);
    await tx.putIdempotency({ key, requestHash: hash, jobIds: [jobId], createdAt: tx.now, answer: { stop: 'job', outcome: answer.outcome } });
    return { ...answer, replayed: false };
  });
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
  const seen = new Set<string>();
  let first: { answers: Answers } | { replay: IdempotencyRow };
  const names = tree ? await sessionTree(ctx, name) : [name];
  try {
    first = await ctx.store.transaction(async (tx) => {
      if (keyed) {
        const row = await seenWith(tx, keyed.key, keyed.hash, keyed.idempotencyKey);
        if (row) return { replay: row };
      }
      // the first pass answers 404 or 409 session_idle for the tree as a whole
      const answers: Answers = tree
        ? await sessions.stopTree(ctx, tx, names, by, true)
        : (await sessions.stopSession(ctx, tx, name, by)).map((a) => ({ ...a, sessionName: name }));
      if (keyed) await tx.putIdempotency(record(keyed, tx.now, answers));
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
    first = { replay: row };
  }
  if ('replay' in first) return replaySession(ctx, name, first.replay);
  add(first.answers);
  if (!tree) return { session_name: name, stopped };

  for (const n of names) seen.add(n);
  for (let pass = 1; pass < TREE_STOP_PASSES; pass++) {
    const fresh = (await sessionTree(ctx, name)).filter((n) => !seen.has(n));
    if (fresh.length === 0) break;
    const answers = await ctx.store.transaction(async (tx) => {
      const answers = await sessions.stopTree(ctx, tx, fresh, by, false);
      if (keyed && answers.length > 0) {
        // the key answers the whole stop: what this pass stopped is added to it
        const row = await tx.idempotency(keyed.key);
        await tx.putIdempotency(record(keyed, row?.createdAt ?? tx.now, answers, row));
      }
      return answers;
    });
    add(answers);
    for (const n of fresh) seen.add(n);
  }
  return { session_name: name, stopped };
}

/** The key's row for what a session stop stopped (after what `before` had, for a tree's later pass). */
function record(keyed: Keyed, createdAt: number, answers: Answers, before?: IdempotencyRow): IdempotencyRow {
  const earlier = before?.answer?.stop === 'session' && 'stopped' in before.answer ? before.answer.stopped : [];
  return {
    key: keyed.key,
    requestHash: keyed.hash,
    jobIds: [...(before?.jobIds ?? []), ...answers.map((a) => a.job.id)],
    createdAt,
    answer: {
      stop: 'session',
      stopped: [...earlier, ...answers.map((a) => ({ outcome: a.outcome, status: a.job.status, session_name: a.sessionName }))],
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
    const s = await store.getSession(name);
    if (s) for (const child of (await store.sessionExtras(s)).children) names.add(child);
  }
  return [...names];
}

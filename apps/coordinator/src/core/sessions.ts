import {
  isTerminal,
  MAX_SESSION_DEPTH,
  type CreateJobRequest,
  type SessionMessage,
  type StopOutcome,
} from '@agentq/protocol';
import type { Turn } from './agent-tokens.js';
import { budgetExceeded } from './budget.js';
import { deliver, maxMessageBytes, messageBytes } from './callbacks.js';
import { isBusy, mustJob, mustSession, txLog, type CoreContext } from './context.js';
import { iso } from './clock.js';
import { CoordinatorError, validation } from './errors.js';
import { newId } from './ids.js';
import { endPending, enqueue, requestStop } from './jobs.js';
import { ZERO_USAGE, type JobRow, type SessionRow, type StopCause } from './rows.js';
import type { Tx } from './store/store.js';

/*
 * Sessions: a new job starts or continues one; stops and messages address one. At most one of a
 * session's jobs is active at a time; the others wait, pending, in creation order.
 */

/**
 * The names a job hands its executor go into the executor's environment (`AGENTQ_SESSION_NAME`,
 * `AGENTQ_AGENT_NAME`, ...) and working directory, none of which can hold the NUL character: no
 * launcher could run such a job (spawn refuses it), and PostgreSQL cannot store it either. Refused
 * here, in every store alike, naming the field.
 */
function refuseNul(req: CreateJobRequest): void {
  const fields = ['session_name', 'parent_session_name', 'agent_name', 'project_dir'] as const;
  for (const field of fields) {
    const value = req[field];
    if (typeof value === 'string' && value.includes('\u0000')) {
      throw validation(field, 'contains the NUL character (\\u0000), which no executor\'s environment can hold');
    }
  }
}

/** Create the job a client asked for (`POST /jobs`), and its session for a start. */
export async function createJob(ctx: CoreContext, tx: Tx, req: CreateJobRequest, actor: string | null): Promise<JobRow> {
  const promptBytes = Buffer.byteLength(req.prompt, 'utf8');
  if (promptBytes > ctx.config.maxPromptBytes) {
    throw validation('prompt', `is ${promptBytes} bytes; the limit is ${ctx.config.maxPromptBytes}`);
  }
  const name = req.session_name;
  const parentName = req.parent_session_name ?? null;
  refuseNul(req);
  if (parentName === name) throw validation('parent_session_name', 'a session cannot be its own parent');

  // a start locks its parent before its own session, as a tree stop locks parents before their
  // children: a start of a session that exists (reopened, or refused) would otherwise hold the
  // child while it waits for the parent a tree stop holds, and the stop then waits for the child
  if (req.type === 'start_session' && parentName !== null) await tx.session(parentName);
  let session = await tx.session(name);
  if (req.type === 'start_session') {
    // browsers and fetch() resolve `.` and `..` in a URL (even percent-encoded): no dashboard
    // could ever reach /sessions/.. to read or stop it
    if (name === '.' || name === '..') throw validation('session_name', `cannot be "${name}": a URL cannot name it`);
    // a closed session (its start never ran: there is no conversation) may be started again, under
    // the same parent; a resume could not continue it, so pointing there would send the client
    // from one 409 to the other
    const reopening = session !== undefined && !session.acceptsInput && parentName === session.parentName;
    if (session && !reopening) {
      if (!session.acceptsInput) {
        throw new CoordinatorError(
          'session_exists',
          `session ${name} already exists, closed: its start job ended before any launcher ran it. ` +
            `Start it again under its parent (parent_session_name ${session.parentName ?? 'none'}), or start a session with another name`,
          { session_name: name, current_status: 'closed', parent_session_name: session.parentName },
        );
      }
      throw new CoordinatorError('session_exists', `session ${name} already exists; use a resume_session job to continue it`, {
        session_name: name,
        current_status: (await isBusy(tx, name)) ? 'busy' : 'idle',
      });
    }
    const parent = parentName === null ? null : await parentSession(tx, parentName);
    // a turn being stopped (by request, with its tree, or by its timeout) starts nothing more:
    // its child would run on after it, out of reach of the stop
    const parentTurn = parent ? await tx.activeJobOf(parent.name) : undefined;
    if (parent && parentTurn?.status === 'stopping') {
      throw new CoordinatorError('parent_stopping', `session ${parent.name} is being stopped (job ${parentTurn.id}): it starts no child now`, {
        field: 'parent_session_name',
        parent_session_name: parent.name,
        job_id: parentTurn.id,
        current_status: 'stopping',
      });
    }
    if (parent && req.budget_usd != null) {
      throw validation('budget_usd', 'only a root session (one without a parent) has a budget; its children share it');
    }
    session = reopening ? await reopen(tx, session!, req) : await newSession(tx, req, parent, actor);
  } else {
    if (!session) {
      throw new CoordinatorError('session_not_found', `session ${name} not found; start it with a start_session job`, {
        session_name: name,
      });
    }
    if (parentName !== null && parentName !== session.parentName) {
      throw validation('parent_session_name', `session ${name} has parent ${session.parentName ?? 'none'}; a resume cannot change it`);
    }
    if (req.budget_usd != null) throw validation('budget_usd', 'is set when a session starts, not on a resume');
    if (!session.acceptsInput) throw sessionClosed(session);
  }
  await checkBudget(tx, session);
  return enqueue(ctx, tx, session, {
    type: req.type,
    prompt: req.prompt,
    agentName: orNone(req.agent_name) ?? session.agentName,
    projectDir: orNone(req.project_dir) ?? session.projectDir,
    // absent: the configured default; null: explicitly no timeout
    timeoutMs: req.timeout_ms === undefined ? ctx.config.defaultJobTimeoutMs : req.timeout_ms,
    // absent: what the session's start required; {} or null: nothing
    requires: req.requires === undefined ? session.requires : req.requires,
    maxCostUsd: req.max_cost_usd ?? null,
    createdBy: actor,
    callbackOf: null,
    messageIds: null,
  });
}

/**
 * An agent's turn (the job whose agent token asks) that is being stopped (its job `stopping`: a
 * stop, a tree stop, its timeout), or has ended, starts nothing more: no child (not even below a
 * child that is not stopping), no resume of a session below it, no message to one. What it
 * started would run on after it, out of reach of the stop: a tree stop holds the deliveries of
 * the sessions under it, and the dying turn would wake them again.
 */
export async function checkTurnGoesOn(tx: Tx, turn: Turn): Promise<void> {
  // locks the turn's session (then its job) before the sessions the create or message locks: in
  // the parents-first order (docs/architecture.md), since the agent scope (checked before) keeps
  // those in the subtree of the turn's session
  const job = await tx.job(turn.jobId);
  // a job requeued and claimed again since the token was checked is a new turn, with a new token
  const same = job?.agentTokenHash === turn.tokenHash;
  if (job && same && (job.status === 'claimed' || job.status === 'running')) return;
  const session = job?.sessionName ?? null;
  throw new CoordinatorError(
    'parent_stopping',
    same
      ? `the turn ${turn.jobId} of session ${session ?? '(gone)'} is being stopped or has ended: it starts no job and sends no message now`
      : `the turn of job ${turn.jobId} this agent token was given for has ended (the job was handed out again): it starts no job and sends no message now`,
    { parent_session_name: session, job_id: turn.jobId, current_status: job?.status ?? null },
  );
}

/** An optional text field of a create: "" is none, as null is (a form's empty field). */
const orNone = (value: string | null | undefined): string | null | undefined => (value === '' ? null : value);

async function parentSession(tx: Tx, parentName: string): Promise<SessionRow> {
  const parent = await tx.session(parentName);
  if (!parent) {
    throw new CoordinatorError('parent_session_not_found', `parent session ${parentName} not found`, {
      field: 'parent_session_name',
      session_name: parentName,
    });
  }
  if (parent.depth + 1 > MAX_SESSION_DEPTH) {
    throw new CoordinatorError(
      'depth_exceeded',
      `session chain too deep: ${parentName} is at depth ${parent.depth}; at most ${MAX_SESSION_DEPTH} levels of children are allowed`,
      { field: 'parent_session_name', max_depth: MAX_SESSION_DEPTH, parent_depth: parent.depth },
    );
  }
  return parent;
}

/** A child session's new work is refused once its tree has spent its budget. */
async function checkBudget(tx: Tx, session: SessionRow): Promise<void> {
  const refusal = await budgetExceeded(tx, session);
  if (refusal) throw refusal;
}

async function newSession(tx: Tx, req: CreateJobRequest, parent: SessionRow | null, actor: string | null): Promise<SessionRow> {
  const seq = await tx.nextSessionSeq();
  const asked = askedByStart(req);
  // every field named, in the order of copySession (row-versions.ts): a spread in a literal this
  // wide is built property by property at run time
  const row: SessionRow = {
    seq,
    name: req.session_name,
    agentName: asked.agentName,
    projectDir: asked.projectDir,
    parentName: parent?.name ?? null,
    rootName: parent?.rootName ?? req.session_name,
    depth: parent ? parent.depth + 1 : 0,
    createdAt: tx.now,
    createdBy: actor,
    updatedAt: tx.now,
    executorSessionId: null,
    lastJobStatus: null,
    lastResult: null,
    lastError: null,
    callbacks: [],
    messages: [],
    deliveryJobId: null,
    inFlight: null,
    deliveriesHeld: false,
    affinity: null,
    acceptsInput: true,
    usage: ZERO_USAGE,
    costUsd: 0,
    treeUsage: ZERO_USAGE,
    treeCostUsd: 0,
    budgetUsd: asked.budgetUsd,
    requires: asked.requires,
  };
  await tx.insertSession(row);
  tx.emit('session.created', { session: row.name });
  if (parent) {
    await tx.updateSession(parent.name, { updatedAt: tx.now });
    tx.emit('session.updated', { session: parent.name });
  }
  return row;
}

/** What a session keeps of the `start_session` that starts it (or starts it again). */
const askedByStart = (req: CreateJobRequest): Pick<SessionRow, 'agentName' | 'projectDir' | 'requires' | 'budgetUsd'> => ({
  agentName: orNone(req.agent_name) ?? null,
  projectDir: orNone(req.project_dir) ?? null,
  requires: req.requires && Object.keys(req.requires).length > 0 ? req.requires : null,
  budgetUsd: req.budget_usd ?? null,
});

/**
 * A closed session started again: what its new start asks for replaces what the first one asked
 * for. Its history stays (the start that never ran, outcomes and messages it held: they are
 * delivered once the new start has run, as for any session).
 */
async function reopen(tx: Tx, session: SessionRow, req: CreateJobRequest): Promise<SessionRow> {
  const row = await tx.updateSession(session.name, {
    acceptsInput: true,
    ...askedByStart(req),
    affinity: null,
    deliveriesHeld: false,
    lastError: null,
    updatedAt: tx.now,
  });
  tx.emit('session.updated', { session: session.name });
  return row;
}

const sessionClosed = (s: SessionRow) =>
  new CoordinatorError(
    'session_closed',
    `session ${s.name} can no longer take input: its start job ended before any launcher ran it, so there is no conversation to continue. ` +
      `Start it again with a start_session of this name (parent_session_name ${s.parentName ?? 'none'})`,
    { session_name: s.name, current_status: 'closed' },
  );

export interface StopAnswer {
  job: JobRow;
  outcome: StopOutcome;
}

/** Stop a job: a pending one ends now, a claimed or running one is asked to stop. */
export async function stopJob(
  ctx: CoreContext,
  tx: Tx,
  jobId: string,
  reason: StopCause,
  by: string | null,
): Promise<StopAnswer> {
  const job = await mustJob(tx, jobId);
  if (isTerminal(job.status)) return { job, outcome: 'already_completed' };
  if (job.status === 'stopping') {
    // already stopping by request, now with its tree: its outcome must not wake the tree either
    if (reason === 'tree' && job.stopReason === 'requested') return { job: await tx.updateJob(job.id, { stopReason: 'tree' }), outcome: 'stopping' };
    return { job, outcome: 'stopping' };
  }
  if (job.status === 'pending') return { job: await endPending(ctx, tx, job, reason, by), outcome: 'stopped' };
  return { job: await requestStop(ctx, tx, job, reason, by), outcome: 'stopping' };
}

/** Stop everything the session is doing: its queued jobs (newest first), then its active one. */
export async function stopSession(ctx: CoreContext, tx: Tx, name: string, by: string | null): Promise<StopAnswer[]> {
  await mustSession(tx, name);
  const answers = await stopJobsOf(ctx, tx, name, by);
  if (answers.length === 0) throw sessionIdle(name);
  return answers;
}

/**
 * Stop a session tree: `names` are the session and the sessions under it, parents before their
 * children. Every one of them holds its deliveries first (the idle ones too: a parent waiting for
 * its children), so the outcomes of the children stopped here wait in `pending_callbacks` instead
 * of resuming their parents; then each one's jobs are stopped. `idleIsError`: nothing to stop is
 * 409 `session_idle` (the first pass), else an empty answer (sessions found by a later pass).
 */
export async function stopTree(
  ctx: CoreContext,
  tx: Tx,
  names: readonly string[],
  by: string | null,
  idleIsError: boolean,
): Promise<Array<StopAnswer & { sessionName: string }>> {
  if (idleIsError) await mustSession(tx, names[0]!);
  const present: string[] = [];
  for (const name of names) {
    const s = await tx.session(name);
    if (!s) continue; // removed by retention since it was listed
    present.push(name);
    if (!s.deliveriesHeld) await tx.updateSession(name, { deliveriesHeld: true });
  }
  const answers: Array<StopAnswer & { sessionName: string }> = [];
  for (const name of present) {
    for (const a of await stopJobsOf(ctx, tx, name, by, 'tree')) answers.push({ ...a, sessionName: name });
  }
  if (answers.length === 0 && idleIsError) throw sessionIdle(names[0]!);
  if (answers.length > 0) txLog(ctx, tx).info({ session_name: names[0], sessions: present.length, jobs: answers.length }, 'session tree stopped');
  return answers;
}

async function stopJobsOf(ctx: CoreContext, tx: Tx, name: string, by: string | null, reason: StopCause = 'requested'): Promise<StopAnswer[]> {
  const targets = (await tx.pendingJobsOf(name)).reverse();
  const active = await tx.activeJobOf(name);
  if (active) targets.push(active);
  const answers: StopAnswer[] = [];
  for (const job of targets) answers.push(await stopJob(ctx, tx, job.id, reason, by));
  return answers;
}

const sessionIdle = (name: string) =>
  new CoordinatorError('session_idle', `session ${name} is idle: it has no job to stop`, {
    session_name: name,
    current_status: 'idle',
  });

/**
 * Queue a message for the session's next turn; delivered now if it is idle. `admit` refuses it
 * when the session or the queue holds too much already (admission.ts).
 */
export async function sendMessage(
  ctx: CoreContext,
  tx: Tx,
  name: string,
  text: string,
  by: string | null,
  admit: (session: SessionRow, text: string) => void = () => undefined,
): Promise<{ message: SessionMessage; jobId: string | null }> {
  const message: SessionMessage = { message_id: newId('msg_'), text, created_at: iso(tx.now), created_by: by };
  // as it will appear in the prompt (escaped), with room left for a child's outcome beside it
  const bytes = messageBytes(message);
  const limit = maxMessageBytes(ctx.config.maxPromptBytes);
  if (bytes > limit) {
    throw validation('text', `takes ${bytes} bytes in the prompt (with & < > escaped, and its tags); the limit is ${limit}`);
  }
  const s = await mustSession(tx, name);
  if (!s.acceptsInput) throw sessionClosed(s);
  await checkBudget(tx, s);
  admit(s, text);
  // an explicit message is new input: it goes even if deliveries were held after a stop
  await tx.updateSession(name, { messages: [...s.messages, message], deliveriesHeld: false, updatedAt: tx.now });
  const job = await deliver(ctx, tx, name);
  tx.emit('session.updated', { session: name });
  txLog(ctx, tx).info({ session_name: name, message_id: message.message_id, job_id: job?.id }, 'message queued');
  return { message, jobId: job?.id ?? null };
}

import { randomBytes, randomUUID } from 'node:crypto';
import { AgentqApiError, AgentqConnectionError, AgentqUsageError, neverSent, toError } from '@agentq/client';
import type { Job, StopSessionResponse } from '@agentq/protocol';
import { z } from 'zod';
import { refusalNote, ToolError } from './answers.js';
import { ANSWER_GRACE_MS, mayHaveCommitted, notCarriedOut, type Attempt } from './outage.js';
import type { AddTool, Caller, ErrorNote, ToolCall, ToolEnv } from './server.js';
import { brief, describeSession, joined, jobView, sessionView } from './views.js';

/* The tools that create work and address sessions: start, resume, message, list children, stop. */

const SessionName = z.string().min(1).max(200);
/** Most jobs a `stop` answer lists (it counts them all). */
const STOPPED_MAX = 50;
const Prompt = z.string().min(1).describe('the instruction for the agent');
/**
 * Job fields a start or a resume may set (the API's names and limits; the coordinator checks them
 * too). Each may be null where the API takes null: for timeout_ms that is "no timeout", which
 * differs from leaving it out when the coordinator has a default (JOB_DEFAULT_TIMEOUT_MS).
 */
const JobOptions = {
  agent_name: z.string().min(1).max(200).nullable().optional().describe('agent blueprint (Claude Code: --agent); a resume inherits the session\'s (also when null)'),
  project_dir: z.string().min(1).max(4096).nullable().optional().describe("working directory on the launcher host; a resume inherits the session's (also when null)"),
  timeout_ms: z
    .number()
    .int()
    .min(1)
    .max(30 * 24 * 3600 * 1000)
    .nullable()
    .optional()
    .describe("the job ends timed_out this long after it is created; null: no timeout (left out: the coordinator's default, if it has one)"),
  requires: z.record(z.string(), z.string()).nullable().optional().describe('labels a launcher must have to run it, e.g. {"gpu":"true"}; null: none'),
  max_cost_usd: z.number().positive().max(1e6).nullable().optional().describe('stop the turn once it would cost more (Claude Code: --max-budget-usd); null: no limit'),
};

/**
 * What the agent is told about being resumed, for a job of `session` whose parent is `parent`.
 * `parentClosed`: the parent (not the caller) can take no more input (its own start never ran),
 * so no result resumes it unless it is started again.
 */
function callbackNote(caller: Caller, job: Job, parentClosed = false): string {
  if (job.parent_session_name !== null && job.parent_session_name === caller.sessionName) {
    return (
      'When it ends you will be resumed with its result in a <background-task-completed> message: you need not poll, ' +
      'wait or check on it. Do other work, or end your turn.'
    );
  }
  if (job.parent_session_name !== null && parentClosed) {
    return (
      `Its parent "${job.parent_session_name}" can take no more input (its start never ran): its result waits there, ` +
      `resuming nobody unless "${job.parent_session_name}" is started again (start_session of that name). Follow it with wait_for_jobs or get_status.`
    );
  }
  if (job.parent_session_name !== null) return `Its parent "${job.parent_session_name}" is resumed with its result when it ends.`;
  return 'It has no parent, so no session is resumed with its result: follow it with wait_for_jobs or get_status.';
}

/**
 * What became of a message that send_message could not queue, for every error: the model must
 * know whether to send it again. `not_found`, `terminal` and `refused`: the coordinator said no
 * (`refused` for now, with `retry_after_ms`, when it is overloaded: answers.ts, refusalNote);
 * `not_sent`: it was never reached; `unknown`: the answer was lost (the connection broke after the
 * call was sent, a proxy answered 5xx, no answer in time, or PostgreSQL was cut off during the
 * commit: 503 storage_unavailable with `sql_state` and without `applied: false`), or the coordinator failed while handling it
 * (500 `internal_error`: it may have failed after queuing it), so it may have been queued.
 */
export function messageOutcome(err: unknown, call: ToolCall): ErrorNote {
  const no = (outcome: string, why: string): ErrorNote => ({ data: { outcome }, line: `Outcome ${outcome}: the message was not queued (${why}).` });
  if (err instanceof AgentqApiError && !effectUnknown(err)) {
    if (err.code === 'session_not_found') return no('not_found', 'no session has this name');
    if (err.code === 'session_closed') return no('terminal', 'the session can take no more input');
    return refusalNote(err, { nothing: 'the message was not queued', outage: call.outage }) ?? no('refused', 'the coordinator refused it');
  }
  if (err instanceof ToolError || err instanceof AgentqUsageError) {
    return refusalNote(err, { nothing: 'the message was not queued' }) ?? no('refused', 'it cannot be sent as given');
  }
  if (err instanceof AgentqConnectionError && neverSent(err)) return no('not_sent', 'the coordinator could not be reached');
  const why = coordinatorFailed(err) ? 'the coordinator failed while handling it' : 'the answer was lost';
  return {
    data: { outcome: 'unknown' },
    line:
      `Outcome unknown: ${why}, so the message may or may not have been queued. get_status of the session ` +
      'counts its waiting messages (pending_messages) and names its active job: send it again only if it did not arrive.',
  };
}

/**
 * What became of a stop that failed, for every error: whether it may have been made, and whether
 * to send it again (a new stop call stops what the session runs by then, also a job started since
 * the first). `refused`: the tool or the coordinator said no (no such job or session, nothing to
 * stop, not allowed; or, with `retry_after_ms`, not now: 429, or its own 503 when it is
 * overloaded or restarting, which come before any work): nothing was done;
 * `not_sent`: no attempt reached the coordinator; `unknown` for anything else: an attempt's answer
 * was lost, the coordinator failed while handling it (500 `internal_error`), its answer could not
 * be read (not JSON, not a stop's answer), or the tool failed after the call: the stop may have
 * been made, so the agent is told to look before stopping again, whatever the cause.
 */
export function stopOutcome(err: unknown, call: ToolCall): ErrorNote {
  const unknown = (why: string): ErrorNote => ({
    data: { outcome: 'unknown' },
    line:
      `Outcome unknown: ${why}, so the stop may or may not have been made. get_status tells; look before ` +
      'calling stop again: a new stop call stops whatever the session runs by then, also a job started since.',
  });
  // the coordinator answered the first attempt's refusal again (its Idempotency-Key): that attempt
  // found nothing to stop, and this one stopped nothing either
  const replayed = err instanceof AgentqApiError && err.details?.['replayed'] === true;
  const refusal = refusalNote(err, { nothing: 'nothing was stopped', outage: call.outage });
  if (replayed) return refusal ?? { data: { outcome: 'refused' }, line: 'Outcome refused: nothing was stopped.' };
  if (call.outage.mayHaveActed || lostAnswer(err)) {
    return unknown(coordinatorFailed(err) ? 'the coordinator failed while handling it' : 'an answer was lost');
  }
  if (err instanceof AgentqConnectionError) {
    return { data: { outcome: 'not_sent' }, line: 'Outcome not_sent: nothing was stopped (the coordinator could not be reached): try again later.' };
  }
  // refused as given (the tool's own checks), by the coordinator (a 4xx), or for now (a 429 or the
  // coordinator's own 503, before any work, with its Retry-After)
  if (refusal) return refusal;
  if (err instanceof ToolError || err instanceof AgentqUsageError) return { data: { outcome: 'refused' }, line: 'Outcome refused: nothing was stopped.' };
  // an answer that is no refusal but cannot be read (a 2xx that is not JSON, or not a stop's
  // answer), or a failure of the tool itself after the call: it may have been made
  return unknown(err instanceof AgentqApiError ? "the coordinator's answer could not be read" : `the tool failed after sending it (${toError(err).message})`);
}

/**
 * The call may have been carried out, its answer lost or its outcome unknown: the connection broke
 * after it was sent, or a 5xx that is no refusal before any work (effectUnknown).
 */
function lostAnswer(err: unknown): boolean {
  if (err instanceof AgentqConnectionError) return !neverSent(err);
  return err instanceof AgentqApiError && effectUnknown(err);
}

/**
 * A 5xx whose effect is unknown: a proxy's (it may have passed the call on), the coordinator's 500
 * `internal_error` (a bug may strike after a change was made: docs/api.md promises nothing was done
 * only for its 429 and its own 503s), or PostgreSQL's 503 `storage_unavailable` (a commit cut off;
 * not one that says `applied: false`).
 * The coordinator's own 503 `overloaded`, `queue_full`, `shutting_down`, ... come before any work.
 */
function effectUnknown(err: AgentqApiError): boolean {
  return err.status >= 500 && !notCarriedOut(err);
}

/** The coordinator itself answered a 5xx that is no refusal for now: it failed while handling the call. */
function coordinatorFailed(err: unknown): boolean {
  return err instanceof AgentqApiError && !err.code.startsWith('http_') && !mayHaveCommitted(err) && effectUnknown(err);
}

/**
 * A create refused for now at its last try (a 429, the coordinator's own 503, PostgreSQL's
 * `applied: false`) after an earlier try of the call whose answer was lost, sent again with the
 * same key by the client or this server (`outage.mayHaveActed`): the refusal is true of the last
 * try only, and "nothing was done" (refusalNote) would have the model make it again, with a new
 * key: a second job.
 */
function refusedAfterLostTry(err: unknown, call: ToolCall): boolean {
  return err instanceof AgentqApiError && call.outage.mayHaveActed && notCarriedOut(err);
}

/** A fresh session name under `parent`: `<parent>-<6 hex>`. */
function newSessionName(parent: string | null): string {
  const suffix = randomBytes(3).toString('hex');
  const name = `${parent ?? 'session'}-${suffix}`;
  return name.length <= 200 ? name : `session-${suffix}`;
}

export function registerSessionTools(add: AddTool, { client, caller, send }: ToolEnv): void {
  const own = caller.sessionName;
  /**
   * Whether the parent of `job`, when it is not the caller, is closed: the coordinator takes a
   * child under a closed session, whose result then resumes nobody. Read after the create, and
   * taken as open when it cannot be read (the job is made either way).
   */
  const parentClosed = async (job: Job, signal: AbortSignal): Promise<boolean> => {
    if (job.parent_session_name === null || job.parent_session_name === own) return false;
    // best effort, and within the answer's grace: the call has spent its time on the create
    return client.getSession(job.parent_session_name, { signal, headersTimeoutMs: ANSWER_GRACE_MS }).then(
      (p) => !p.accepts_input,
      () => false,
    );
  };

  add(
    'start_session',
    {
      title: 'Start a child session',
      description: [
        'Start a new agent session that works on `prompt` in the background (on an agentq launcher) and return at once with its job.',
        own
          ? `It is a child of your session ("${own}") unless parent_session_name says otherwise. When its job ends (completed, failed or stopped) ` +
            'you are resumed with its result in a <background-task-completed> message: you do not need to poll, wait or check on it. ' +
            'To work in parallel, start several children, then end your turn; their results resume you (results that arrive together come in one turn).'
          : 'Outside an agentq job there is no session to resume: give parent_session_name to have a session told, or follow the job with wait_for_jobs.',
      ].join(' '),
      inputSchema: {
        prompt: Prompt,
        session_name: SessionName.optional().describe(`name of the new session (unique); default: "${own ?? 'session'}-" and 6 random hex digits`),
        parent_session_name: SessionName.nullable()
          .optional()
          .describe(own ? `the session told when it ends; default your own ("${own}"); null: a root session` : 'the session told when it ends; default none'),
        ...JobOptions,
        budget_usd: z.number().positive().max(1e6).nullable().optional().describe('root sessions only: the budget of the tree it starts; null: none'),
      },
    },
    async (args, call) => {
      const parent = args.parent_session_name === undefined ? (own ?? null) : args.parent_session_name;
      const { session_name, ...rest } = args;
      const body = { ...rest, type: 'start_session' as const, session_name: session_name ?? newSessionName(parent), parent_session_name: parent };
      // one key for every attempt: a create sent again after a lost answer makes no second job
      const idempotencyKey = randomUUID();
      // a try the client sent again after its answer was lost may have started it (refusalNote)
      const onResend = (err: unknown) => call.outage.resentByClient(err);
      const job = await send((a) => client.createJob(body, { signal: a.signal, idempotencyKey, onResend }), { resend: 'always', call }).catch(
        (err: unknown) => {
          // the last answer lost, or the last try refused for now after a try whose answer was lost
          // (not "nothing was done": that try may have started it): the model must learn the name
          // (perhaps made up here) to look for it
          if ((err instanceof AgentqConnectionError && !neverSent(err)) || refusedAfterLostTry(err, call)) {
            throw new AgentqConnectionError(
              `${toError(err).message}. Session "${body.session_name}" may have been started: get_status with session_name "${body.session_name}" ` +
                'tells (a start_session of that name cannot make a second one)',
              { cause: err },
            );
          }
          throw err;
        },
      );
      const as = job.parent_session_name === null ? 'a root session' : job.parent_session_name === own ? 'your child' : `a child of "${job.parent_session_name}"`;
      return {
        message: `Started session "${job.session_name}" as ${as}: job ${job.job_id}, ${job.status}. ${callbackNote(caller, job, await parentClosed(job, call.signal))}`,
        data: { job: jobView(job) },
      };
    },
  );

  add(
    'resume_session',
    {
      title: 'Continue a session',
      description:
        'Give an existing session (usually a child of yours that has finished) a new prompt, continuing its conversation. ' +
        'The job waits behind the session\'s current one if it is busy. When it ends, the session\'s parent is resumed with its result, ' +
        'so for a child of yours you need not poll. To add to what a busy child is doing, send_message may suit better.',
      inputSchema: { session_name: SessionName.describe('the session to continue'), prompt: Prompt, ...JobOptions },
    },
    async (args, call) => {
      const idempotencyKey = randomUUID();
      const onResend = (err: unknown) => call.outage.resentByClient(err);
      const job = await send((a) => client.createJob({ ...args, type: 'resume_session' }, { signal: a.signal, idempotencyKey, onResend }), {
        resend: 'always',
        call,
      }).catch((err: unknown) => {
        // (as start_session's)
        if (refusedAfterLostTry(err, call)) {
          throw new AgentqConnectionError(
            `${toError(err).message}. A job of session "${args.session_name}" may have been queued by a try whose answer was lost: ` +
              `get_status with session_name "${args.session_name}" tells before resuming it again`,
            { cause: err },
          );
        }
        throw err;
      });
      const when = job.status === 'pending' && job.pending_reason?.startsWith('waiting for job') ? ' (after its current job)' : '';
      return {
        message: `Queued job ${job.job_id} to resume session "${job.session_name}": ${job.status}${when}. ${callbackNote(caller, job, await parentClosed(job, call.signal))}`,
        data: { job: jobView(job) },
      };
    },
  );

  add(
    'send_message',
    {
      title: 'Message a session',
      description:
        'Send `text` to a session, delivered with its next turn: at once as a new turn if the session is idle, otherwise together with ' +
        'anything else waiting when its current turn ends. Answers outcome "queued"; on an error, whether it was queued: "not_found" ' +
        '(unknown session), "terminal" (it can take no more input), "refused" or "not_sent" (not queued), or "unknown" (the answer ' +
        'was lost, or the coordinator failed: check get_status of the session before sending it again).',
      inputSchema: { session_name: SessionName.describe('the session to message'), text: z.string().min(1).describe('the message') },
    },
    async ({ session_name, text }, call) => {
      // no Idempotency-Key for messages: sent again only when the first attempt surely did nothing
      const r = await send((a) => client.sendMessage(session_name, { text }, { signal: a.signal }), { resend: 'unsent', call });
      const when = r.job_id ? `delivered now by job ${r.job_id} (the session was idle)` : 'delivered with its next turn (the session is busy)';
      return { message: `Message ${r.message_id} queued for "${r.session_name}": ${when}.`, data: { ...r } };
    },
    messageOutcome,
  );

  add(
    'list_children',
    {
      title: 'List child sessions',
      description: `The child sessions of a session (default your own${own ? `, "${own}"` : ''}): each one's status, last job status and last result.`,
      inputSchema: {
        session_name: SessionName.optional().describe('whose children; default your own session'),
        status: z.enum(['idle', 'busy']).optional().describe('only idle or only busy children'),
        limit: z.number().int().min(1).max(100).optional().describe('at most this many (default 50), newest first'),
        cursor: z.string().min(1).max(200).optional().describe('next_cursor of the previous answer'),
      },
      annotations: { readOnlyHint: true },
    },
    async (args, call) => {
      const parent = args.session_name ?? own;
      if (parent === undefined) throw new ToolError('validation_failed', 'session_name is required outside an agentq job', { field: 'session_name' });
      const query = { parent, limit: args.limit ?? 50, ...(args.status ? { status: args.status } : {}), ...(args.cursor ? { cursor: args.cursor } : {}) };
      const list = await send((a) => client.listSessions(query, { signal: a.signal }), { resend: 'always', call });
      // each child's last result is cut shorter here than in get_status: a list may be long
      const sessions = list.sessions.map((s) => sessionView(s, 2048));
      const lines = sessions.map((s) => {
        const last = s.last_result ?? s.last_error;
        const said = last === null ? '' : `: ${brief(last, 200)}`;
        return `- "${s.session_name}": ${s.status}${s.active_job_id ? ` (job ${s.active_job_id})` : ''}, last job ${s.last_job_status ?? 'none'}${said}`;
      });
      const head = sessions.length === 0 ? `Session "${parent}" has no children${args.status ? ` that are ${args.status}` : ''}.` : `Children of "${parent}":`;
      const more = list.next_cursor ? `\nMore: call again with cursor "${list.next_cursor}".` : '';
      return {
        message: [head, ...lines].join('\n') + more,
        data: { parent_session_name: parent, sessions, next_cursor: list.next_cursor },
      };
    },
  );

  add(
    'stop',
    {
      title: 'Stop a job or a child session',
      description:
        'Stop one job (job_id), or everything a session is doing (session_name: its queued jobs end at once, its running job is stopped ' +
        'by its launcher). Give exactly one. A stopped child still resumes its parent, with status stopped. With tree: true, the session ' +
        'and every session under it stop, and stay stopped (none is resumed by its stopped children) until given new input. ' +
        'To stop your own turn, just end it. A job stop answers outcome ("stopped", "stopping": its launcher is ending it, or ' +
        `"already_completed": it had ended), its status and the job. A session stop answers stopped (the first ${STOPPED_MAX} jobs it stopped, each ` +
        'with its outcome), stopped_count and the session as it is after the stop (null if it could not be read just now). resent: true ' +
        'when the stop was sent again after its answer was lost: the answer is what the first attempt did. job_truncated: true when ' +
        'the job has been deleted since (history retention) and job, the copy kept with the stop, had its prompt, result or error cut to ' +
        '512 characters: no more of it can be read. On an error, outcome says whether it was made: "refused" or "not_sent" (nothing was ' +
        'stopped), or "unknown" (an answer was lost: get_status tells; look before calling stop again, as a new stop call stops whatever the session runs by then).',
      inputSchema: {
        job_id: z.string().min(1).max(200).optional().describe('the job to stop'),
        session_name: SessionName.optional().describe('the session to stop (e.g. a child of yours)'),
        tree: z.boolean().optional().describe('with session_name: also stop every session under it (its children, theirs, ...)'),
      },
      annotations: { destructiveHint: true, idempotentHint: true },
    },
    async ({ job_id, session_name, tree }, call) => {
      if ((job_id === undefined) === (session_name === undefined)) {
        throw new ToolError('validation_failed', 'give exactly one of job_id and session_name');
      }
      if (tree && session_name === undefined) throw new ToolError('validation_failed', 'tree goes with session_name', { field: 'tree' });
      if ((job_id !== undefined && job_id === caller.jobId) || (session_name !== undefined && session_name === own)) {
        throw new ToolError('validation_failed', 'that is your own turn: to stop it, end your turn', { job_id: caller.jobId, session_name: own });
      }
      // A stop whose answer was lost (the coordinator went away) is sent again, with the same
      // Idempotency-Key: the coordinator answers what the first attempt did (`replayed`) and stops
      // nothing more, though the session may have started a job in between (a message, a child's
      // outcome). A coordinator that ignores the key (older than the key on stops) acts again:
      // then what the second attempt is answered may be the first one's doing: the job it stopped
      // is "already over", the session it stopped has nothing left to stop (409 session_idle).
      // Said as such, not as a job that ended by itself or a failure.
      const idempotencyKey = randomUUID();
      const resent = () => call.outage.mayHaveActed;
      // the client's own retries of a lost answer (stopRetries) count as this tool's: the first may have stopped
      const onResend = (err: unknown) => call.outage.resentByClient(err);
      const replayNote =
        'This stop was sent again after its answer was lost (the coordinator went away): this is what its first attempt did, ' +
        'as the coordinator answered it again; sending it again stopped nothing more.';
      const byFirst =
        'This stop was sent again after its answer was lost (the coordinator went away): its first attempt most likely did it, ' +
        'and sending it again did nothing more (stopping twice is stopping once).';
      if (job_id !== undefined) {
        const r = await send((a) => client.stopJob(job_id, { signal: a.signal, idempotencyKey, onResend }), { resend: 'always', call });
        const what = { stopped: 'stopped', stopping: 'stopping (its launcher is ending it)', already_completed: `already over (${r.status})` }[r.outcome];
        const byFirstAttempt = !r.replayed && resent() && r.outcome === 'already_completed' && r.status === 'stopped';
        // a replay after history retention deleted the job answers the copy its key kept, cut
        const truncated =
          r.job_truncated === true
            ? ' The job has been deleted since (history retention): `job` is the copy the coordinator kept with the stop, its prompt, ' +
              'result and error cut to their first 512 characters and its lists of ids to 32 (job_truncated). No more of it can be read: the job is gone.'
            : '';
        const message = r.replayed
          ? `Job ${r.job_id}: ${what}. ${replayNote}${truncated}`
          : byFirstAttempt
            ? `Job ${r.job_id}: stopped. ${byFirst}`
            : `Job ${r.job_id}: ${what}.`;
        return {
          message,
          data: {
            job_id: r.job_id,
            outcome: r.outcome,
            status: r.status,
            ...(resent() || r.replayed ? { resent: true } : {}),
            ...(r.job_truncated === true ? { job_truncated: true } : {}),
            job: jobView(r.job),
          },
        };
      }
      const stopSession = (a: Attempt): Promise<StopSessionResponse> =>
        client.stopSession(session_name!, { signal: a.signal, idempotencyKey, onResend, ...(tree ? { tree } : {}) }).catch((err: unknown) => {
          // (a refusal answered again, `details.replayed`, is the first attempt's own: it stays one)
          const fromFirst = err instanceof AgentqApiError && err.code === 'session_idle' && err.details?.['replayed'] !== true;
          if (resent() && fromFirst) return { session_name: session_name!, stopped: [] };
          throw err;
        });
      const r = await send(stopSession, { resend: 'always', call });
      // a session may have many jobs queued: the answer names the first ones and counts them all
      const stopped = r.stopped.slice(0, STOPPED_MAX);
      const lines = stopped.map((s) => `job ${s.job_id}${s.session_name === r.session_name ? '' : ` (session "${s.session_name}")`} ${s.outcome}`);
      const more = r.stopped.length > stopped.length ? ` and ${r.stopped.length - stopped.length} more job(s)` : '';
      const message =
        r.stopped.length === 0
          ? `Session "${r.session_name}" has nothing left to stop. ${byFirst} get_status of the session shows how its jobs ended.`
          : `Stopping session "${r.session_name}": ${lines.join(', ')}${more}.${r.replayed ? ` ${replayNote}` : ''}`;
      const data = { session_name: r.session_name, stopped, stopped_count: r.stopped.length, ...(resent() || r.replayed ? { resent: true } : {}) };
      // the stop is done: a session that cannot be read just now does not make it a failure
      const read = await client.getSession(r.session_name, { signal: call.signal }).then(sessionView, () => undefined);
      if (!read) return { message: `${message} (Its state could not be read just now: get_status reads it.)`, data: { ...data, session: null } };
      return { message, details: joined(describeSession(read)), data: { ...data, session: read } };
    },
    stopOutcome,
  );
}

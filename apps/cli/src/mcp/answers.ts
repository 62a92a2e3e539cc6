import { AgentqApiError, AgentqConnectionError, AgentqUsageError, isGatewayError, toError } from '@agentq/client';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import { notCarriedOut, outageSpans, postgresUnavailable, type OutageRecord } from './outage.js';

/*
 * How every tool answers: `content` is one text block, written for a model to read: `message`,
 * then `details` (results, output) when there are any. `structuredContent` is
 * `{ message, ...data }`: the same message, and the data that the details render. MCP clients
 * differ in which of the two they show the model (Claude Code shows the structured content), so
 * each carries everything once: the message says what happened and what to do next.
 */

export interface Answer {
  message: string;
  /** the text form of what `data` holds at length (a result, output), after the message */
  details?: string;
  data: Record<string, unknown>;
}

/** A refusal by the tool itself (wrong combination of arguments, stopping its own turn). */
export class ToolError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/**
 * The refusal of arguments that fail a tool's schema (a missing `prompt`, an empty `job_ids`):
 * `validation_failed`, as the coordinator says it (`<field>: <why>`, `details.field`), every
 * failing field in `details.issues`. An argument the tool does not take is one of them (`known`:
 * the tool's arguments, listed in its message).
 */
export function argumentsRefused(err: z.ZodError, known: readonly string[] = []): ToolError {
  const issues = err.issues.flatMap((i) =>
    // an argument the tool does not take is named as the coordinator names an unknown body field
    i.code === 'unrecognized_keys'
      ? i.keys.map((key) => ({
          field: fieldName([...i.path, key]),
          message: `is not a known argument${i.path.length === 0 && known.length > 0 ? ` (known: ${known.join(', ')})` : ''}`,
        }))
      : [{ field: fieldName(i.path), message: i.message }],
  );
  const first = issues[0] ?? { field: 'arguments', message: 'are invalid' };
  return new ToolError('validation_failed', issues.map((i) => `${i.field}: ${i.message}`).join('; '), { field: first.field, issues });
}

/** `job_ids[0]`, `requires.gpu`: a path the way the coordinator names a field. */
function fieldName(path: ReadonlyArray<PropertyKey>): string {
  if (path.length === 0) return 'arguments';
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

/** What a tool adds to one of its errors. */
export interface ErrorNote {
  data?: Record<string, unknown>;
  /** said after the error's message, e.g. whether the thing asked for was done */
  line?: string;
}

/**
 * `outcome: "refused"` for a call that was refused, on every tool: nothing was done (`nothing`
 * says it the tool's way: "nothing was stopped", "the message was not queued"). Three kinds:
 * - refused as given: its arguments fail the tool's schema or its own checks, the coordinator
 *   answered 400 `validation_failed`, there is no such tool, or the call cannot be sent (a token
 *   an HTTP header cannot carry): the agent may fix the call and make it again;
 * - refused by the coordinator: any other 4xx but 429 (404 no such job or session, 409 the
 *   session exists or is idle, 422 over budget or too deep, 401/403 not allowed): its code and
 *   message are the error, a hint follows for some (failure, HINTS);
 * - refused for now: a 429, or the coordinator's own 503 (`overloaded`, `queue_full`,
 *   `shutting_down`, ...: not a proxy's, and not PostgreSQL's `storage_unavailable`, whose commit
 *   may have been made, unless it says `applied: false`), still so when the tool stopped sending it again (`outage`: how long it
 *   tried): `retry_after_ms` is its Retry-After (null: none), and the agent is told to try later.
 * Anything else (unreachable, a lost answer, a 5xx) is no refusal: undefined.
 */
export function refusalNote(err: unknown, o: { nothing?: string; outage?: OutageRecord } = {}): ErrorNote | undefined {
  const nothing = o.nothing ?? 'nothing was done';
  const asGiven =
    (err instanceof ToolError && (err.code === 'validation_failed' || err.code === 'tool_not_found')) ||
    (err instanceof AgentqApiError && err.code === 'validation_failed') ||
    err instanceof AgentqUsageError;
  if (asGiven) return { data: { outcome: 'refused' }, line: `Outcome refused: ${nothing} (the call was refused as given): correct it and call again.` };
  if (!(err instanceof AgentqApiError) || isGatewayError(err)) return undefined;
  if (err.status === 429 || (err.status === 503 && notCarriedOut(err))) {
    const ms = err.retryAfterMs ?? null;
    const tried = o.outage?.view();
    // (how long it refused, apart from how long it could not be reached: no answer is no refusal)
    const kept = !tried ? '' : tried.unreachable_ms === 0 ? ` It refused every try for ${(tried.refused_ms / 1000).toFixed(1)} s.` : ` It ${outageSpans(tried)}.`;
    const when = ms === null ? 'in a little while' : `in ${Math.max(1, Math.ceil(ms / 1000))} s (its Retry-After)`;
    return {
      data: { outcome: 'refused', retry_after_ms: ms },
      line:
        `Outcome refused for now: ${nothing}: ${postgresUnavailable(err) ? 'the coordinator cannot reach its database' : 'the coordinator is overloaded, limiting calls or restarting'}, and refuses calls for now (${err.code}).` +
        `${kept} Try again ${when}.`,
    };
  }
  if (err.status >= 400 && err.status < 500) return { data: { outcome: 'refused' }, line: `Outcome refused: ${nothing} (the coordinator refused the call).` };
  return undefined;
}

export function success(a: Answer): CallToolResult {
  const text = a.details ? `${a.message}\n\n${a.details}` : a.message;
  return { content: [{ type: 'text', text }], structuredContent: { message: a.message, ...a.data } };
}

/** What to tell a model after some errors, beyond the coordinator's own message. */
const HINTS: Readonly<Record<string, string>> = {
  forbidden: "This agent's token acts only on its own session and the sessions below it.",
  unauthorized: 'The token is not valid (an agent token stops working when its job ends).',
  session_exists: 'Pick another session_name, or continue that session with resume_session.',
  budget_exceeded: 'The session tree has spent its budget: no new child jobs can start.',
  depth_exceeded: 'Sessions nest at most 5 levels deep: do this work yourself instead of delegating it.',
  job_not_found: 'Check the job_id, as an earlier answer gave it: get_status of a session lists its recent jobs (recent_job_ids).',
  session_not_found: 'Check the session_name: list_children lists the children of a session (by default your own).',
  parent_session_not_found: 'Check parent_session_name: list_children lists the children of a session (by default your own).',
};

/** For a 404 without a hint of its own (a proxy's, a path the coordinator does not know). */
const NOT_FOUND_HINT = 'Check the ids and names in the call: get_status and list_children show the jobs and sessions there are.';

/**
 * An error as a tool result (`isError`): the coordinator's code and message (and details), or the
 * tool's own. `data` adds fields to the structured content (`send_message`'s `outcome`), `line` a
 * line to the message (what became of the call).
 */
export function failure(err: unknown, data: Record<string, unknown> = {}, line?: string): CallToolResult {
  let error: { code: string; message: string; details?: Record<string, unknown> };
  if (err instanceof AgentqApiError && isGatewayError(err)) {
    // a proxy or gateway answered for the coordinator (which it could not reach, most often):
    // the coordinator was not reached, and is said so, with what the proxy answered
    error = {
      code: 'coordinator_unreachable',
      message: `the coordinator could not be reached: a proxy or gateway in front of it answered ${err.message}`,
      details: { status: err.status },
    };
  } else if (err instanceof AgentqApiError || err instanceof ToolError) {
    error = { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) };
  } else if (err instanceof AgentqConnectionError || err instanceof AgentqUsageError) {
    error = { code: err.code, message: err.message };
  } else {
    error = { code: 'internal_error', message: toError(err).message };
  }
  // a closed session cannot be resumed either: the coordinator's message says what to do
  const closed = error.code === 'session_exists' && error.details?.['current_status'] === 'closed';
  const notFound = err instanceof AgentqApiError && err.status === 404;
  const hint = closed ? undefined : (HINTS[error.code] ?? (notFound ? NOT_FOUND_HINT : undefined));
  const message = `${error.message} (${error.code})${line ? `\n${line}` : ''}${hint ? `\n${hint}` : ''}`;
  return { isError: true, content: [{ type: 'text', text: message }], structuredContent: { message, ...data, error } };
}

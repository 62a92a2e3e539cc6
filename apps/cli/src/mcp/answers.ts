import { AgentqApiError, AgentqConnectionError, isGatewayError, toError } from '@agentq/client';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';

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
 * failing field in `details.issues`.
 */
export function argumentsRefused(err: z.ZodError): ToolError {
  const issues = err.issues.map((i) => ({ field: fieldName(i.path), message: i.message }));
  const first = issues[0] ?? { field: 'arguments', message: 'are invalid' };
  return new ToolError('validation_failed', issues.map((i) => `${i.field}: ${i.message}`).join('; '), { field: first.field, issues });
}

/** `job_ids[0]`, `requires.gpu`: a path the way the coordinator names a field. */
function fieldName(path: ReadonlyArray<PropertyKey>): string {
  if (path.length === 0) return 'arguments';
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

/**
 * `outcome: "refused"` for a call refused as given, on every tool: its arguments fail the tool's
 * schema or its own checks, the coordinator answered 400 validation_failed, or there is no such
 * tool. Nothing was done: the agent may fix the call and make it again. (send_message says this
 * and more of its errors itself: tools-sessions.ts, messageOutcome.)
 */
export function refusalNote(err: unknown): { data: { outcome: 'refused' }; line: string } | undefined {
  const refused =
    (err instanceof ToolError && (err.code === 'validation_failed' || err.code === 'tool_not_found')) ||
    (err instanceof AgentqApiError && err.code === 'validation_failed');
  if (!refused) return undefined;
  return { data: { outcome: 'refused' }, line: 'Outcome refused: nothing was done (the call was refused as given): correct it and call again.' };
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
};

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
  } else if (err instanceof AgentqConnectionError) {
    error = { code: 'coordinator_unreachable', message: err.message };
  } else {
    error = { code: 'internal_error', message: toError(err).message };
  }
  // a closed session cannot be resumed either: the coordinator's message says what to do
  const closed = error.code === 'session_exists' && error.details?.['current_status'] === 'closed';
  const hint = closed ? undefined : HINTS[error.code];
  const message = `${error.message} (${error.code})${line ? `\n${line}` : ''}${hint ? `\n${hint}` : ''}`;
  return { isError: true, content: [{ type: 'text', text: message }], structuredContent: { message, ...data, error } };
}

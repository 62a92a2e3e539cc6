import { AgentqApiError, AgentqConnectionError, toError } from '@agentq/client';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

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
  if (err instanceof AgentqApiError || err instanceof ToolError) {
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

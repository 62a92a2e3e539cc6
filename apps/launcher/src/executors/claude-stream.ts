import type { ExecutorEvent, Usage } from '@agentq/protocol';

/**
 * Claude Code's `--output-format stream-json` lines, mapped to executor events. One JSON object
 * per line: `system`/`init` carries `session_id`; `assistant` messages carry content blocks (text,
 * tool_use); the last line is a `result`:
 *
 *   {"type":"result","subtype":"success"|"error_max_turns"|"error_during_execution"|"error_max_budget_usd"|...,
 *    "is_error":false,"result":"...","session_id":"...","num_turns":3,"duration_ms":..,"duration_api_ms":..,
 *    "total_cost_usd":0.012,"usage":{"input_tokens":..,"output_tokens":..,"cache_read_input_tokens":..,
 *    "cache_creation_input_tokens":..,...},"errors":["..."]?}
 */
export type ClaudeMessage = Record<string, unknown>;

export function parseClaudeLine(line: string): ClaudeMessage | undefined {
  if (!line.trimStart().startsWith('{')) return undefined;
  try {
    const v: unknown = JSON.parse(line);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as ClaudeMessage) : undefined;
  } catch {
    return undefined;
  }
}

/** The showable parts of an assistant message: text blocks, and one line per tool call. */
export function assistantText(msg: ClaudeMessage): string[] {
  const content = (msg['message'] as { content?: unknown } | undefined)?.content;
  if (!Array.isArray(content)) return [];
  const out: string[] = [];
  for (const block of content as Array<Record<string, unknown>>) {
    if (block['type'] === 'text' && typeof block['text'] === 'string') out.push(`${block['text']}\n`);
    else if (block['type'] === 'tool_use') {
      out.push(`[tool ${String(block['name'])}] ${short(JSON.stringify(block['input'] ?? {}))}\n`);
    }
  }
  return out;
}

/**
 * The tool calls claude's permission system refused in the turn (the result's
 * `permission_denials`), one line each: `-p` cannot ask, so a call the settings do not allow is
 * refused, and the model carries on without it. The output had shown the call as any other.
 */
export function deniedText(msg: ClaudeMessage): string[] {
  const denials = msg['permission_denials'];
  if (!Array.isArray(denials)) return [];
  const out: string[] = [];
  for (const denial of denials as unknown[]) {
    if (typeof denial !== 'object' || denial === null) continue;
    const d = denial as Record<string, unknown>;
    const tool = typeof d['tool_name'] === 'string' && d['tool_name'] !== '' ? d['tool_name'] : 'a tool';
    out.push(`[permission denied: ${tool}] ${short(JSON.stringify(d['tool_input'] ?? {}))}\n`);
  }
  return out;
}

function short(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** What a claude `result` line says. */
export interface ClaudeResult {
  /** `result` or `error_*` */
  subtype: string;
  isError: boolean;
  text: string;
  /** the `errors` array of error results, joined */
  errors: string;
  /** the `result` event for the launcher: the text and the accounting */
  event: Extract<ExecutorEvent, { type: 'result' }>;
}

export function readResult(msg: ClaudeMessage): ClaudeResult {
  const subtype = typeof msg['subtype'] === 'string' ? msg['subtype'] : 'unknown';
  const text = typeof msg['result'] === 'string' ? msg['result'] : '';
  const errors = Array.isArray(msg['errors']) ? msg['errors'].map(String).join('; ') : '';
  const isError = msg['is_error'] === true || subtype !== 'success';
  const event: ClaudeResult['event'] = { type: 'result', text };
  const usage = readUsage(msg['usage']);
  if (usage) event.usage = usage;
  const cost = msg['total_cost_usd'];
  if (typeof cost === 'number' && Number.isFinite(cost) && cost >= 0) event.cost_usd = cost;
  const turns = count(msg['num_turns']);
  if (turns !== undefined) event.num_turns = turns;
  const apiMs = count(msg['duration_api_ms']);
  if (apiMs !== undefined) event.duration_api_ms = apiMs;
  return { subtype, isError, text, errors, event };
}

/**
 * The four token counts of claude's usage object (it has more: server_tool_use, service_tier...).
 * A usage that is missing, or that lacks the input or the output count (`{}`), is unknown, and
 * left out: the job's `usage` stays null. Four zeros would say the turn used no tokens, and be
 * added to its session's sums as such. The two cache counts alone may be missing (an API answer
 * that used no cache may leave them out or null): those are 0.
 */
function readUsage(value: unknown): Usage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const u = value as Record<string, unknown>;
  const input = count(u['input_tokens']);
  const output = count(u['output_tokens']);
  if (input === undefined || output === undefined) return undefined;
  return {
    input_tokens: input,
    output_tokens: output,
    cache_read_input_tokens: count(u['cache_read_input_tokens']) ?? 0,
    cache_creation_input_tokens: count(u['cache_creation_input_tokens']) ?? 0,
  };
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.round(value) : undefined;
}

/** What claude says when `--resume` names a session it does not have on this host. */
export const NO_CONVERSATION = /No conversation found/i;

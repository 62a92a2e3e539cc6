import type { Job, Session, Usage } from '@agentq/protocol';

/*
 * What the MCP tools answer about jobs and sessions: compact views of the API's objects, bounded
 * in size, because a model reads them. Some clients (Claude Code among them) show the model the
 * structured content rather than the text, so both carry the same readable `message` and the same
 * data. The API's full objects stay one call away (`agentq status <job_id> --json`).
 */

/**
 * Longest result and error (or last result, last error) a view carries, in bytes, the two
 * together: longer ones are cut and say so (`*_full_bytes`). The error has the first claim: it is
 * short, and says why the last turn failed.
 */
export const RESULT_MAX_BYTES = 16 * 1024;
/** Most child names a session view lists (the newest); list_children pages through all of them. */
export const CHILDREN_MAX = 50;

/** What a view says about a text it may have cut. */
export interface Bounded {
  text: string | null;
  /** set when the text was cut: its full size in bytes */
  full_bytes?: number;
}

/** The first `maxBytes` bytes of `s`, cut on a character boundary. */
export function cutUtf8(s: string, maxBytes: number): string {
  const buf = Buffer.from(s, 'utf8');
  if (buf.length <= maxBytes) return s;
  let end = Math.max(0, maxBytes);
  while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--;
  return buf.subarray(0, end).toString('utf8');
}

/**
 * The first `maxUnits` UTF-16 code units of `s` and `…` when it is longer, never cutting a
 * surrogate pair in two: a lone surrogate is not Unicode, and a model's API may refuse the whole
 * request that carries it.
 */
export function brief(s: string, maxUnits: number): string {
  if (s.length <= maxUnits) return s;
  const high = s.charCodeAt(maxUnits - 1);
  const end = high >= 0xd800 && high <= 0xdbff ? maxUnits - 1 : maxUnits;
  return `${s.slice(0, end)}…`;
}

export function bounded(text: string | null, maxBytes: number): Bounded {
  if (text === null) return { text: null };
  const full = Buffer.byteLength(text, 'utf8');
  return full <= maxBytes ? { text } : { text: cutUtf8(text, maxBytes), full_bytes: full };
}

export interface JobView {
  job_id: string;
  type: Job['type'];
  session_name: string;
  parent_session_name: string | null;
  status: Job['status'];
  terminal: boolean;
  /** the agent's answer (completed jobs), at most RESULT_MAX_BYTES */
  result: string | null;
  /** set when `result` was cut: the whole result's size */
  result_full_bytes?: number;
  error: string | null;
  error_full_bytes?: number;
  error_code: string | null;
  /** why a pending job waits */
  pending_reason: string | null;
  /** for a delivery resume: the child jobs whose outcomes it carries */
  callback_of: string[] | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  output_bytes: number;
  usage: Usage | null;
  cost_usd: number | null;
}

export function jobView(job: Job, resultMaxBytes = RESULT_MAX_BYTES): JobView {
  // the error first: it is short and says why the job failed; the result has the rest
  const error = bounded(job.error, resultMaxBytes);
  const result = bounded(job.result, resultMaxBytes - Buffer.byteLength(error.text ?? '', 'utf8'));
  return {
    job_id: job.job_id,
    type: job.type,
    session_name: job.session_name,
    parent_session_name: job.parent_session_name,
    status: job.status,
    terminal: job.terminal,
    result: result.text,
    ...(result.full_bytes === undefined ? {} : { result_full_bytes: result.full_bytes }),
    error: error.text,
    ...(error.full_bytes === undefined ? {} : { error_full_bytes: error.full_bytes }),
    error_code: job.error_code,
    pending_reason: job.pending_reason,
    callback_of: job.callback_of,
    created_at: job.created_at,
    started_at: job.started_at,
    completed_at: job.completed_at,
    output_bytes: job.output_bytes,
    usage: job.usage,
    cost_usd: job.cost_usd,
  };
}

export interface SessionView {
  session_name: string;
  parent_session_name: string | null;
  depth: number;
  /** busy while one of its jobs is pending, claimed, running or stopping */
  status: Session['status'];
  active_job_id: string | null;
  last_job_status: Session['last_job_status'];
  last_result: string | null;
  last_result_full_bytes?: number;
  last_error: string | null;
  last_error_full_bytes?: number;
  /** false once the session can take no more input (docs/sessions.md) */
  accepts_input: boolean;
  /** its newest CHILDREN_MAX children, oldest first */
  children: string[];
  /** how many children it has in all */
  children_count: number;
  /** its most recent jobs, oldest first (at most 20) */
  recent_job_ids: string[];
  job_count: number;
  pending_messages: number;
  pending_callbacks: number;
  usage: Usage;
  cost_usd: number;
  tree_usage: Usage;
  tree_cost_usd: number;
  budget_usd: number | null;
}

export function sessionView(s: Session, resultMaxBytes = RESULT_MAX_BYTES): SessionView {
  // a session keeps its last result and its last error apart (a failed turn after a completed one
  // has both): the error first, as for a job
  const lastError = bounded(s.last_error, resultMaxBytes);
  const last = bounded(s.last_result, resultMaxBytes - Buffer.byteLength(lastError.text ?? '', 'utf8'));
  return {
    session_name: s.session_name,
    parent_session_name: s.parent_session_name,
    depth: s.depth,
    status: s.status,
    active_job_id: s.active_job_id,
    last_job_status: s.last_job_status,
    last_result: last.text,
    ...(last.full_bytes === undefined ? {} : { last_result_full_bytes: last.full_bytes }),
    last_error: lastError.text,
    ...(lastError.full_bytes === undefined ? {} : { last_error_full_bytes: lastError.full_bytes }),
    accepts_input: s.accepts_input,
    children: s.children.slice(-CHILDREN_MAX),
    children_count: s.children.length,
    recent_job_ids: s.job_ids.slice(-20),
    job_count: s.job_ids.length,
    pending_messages: s.pending_messages.length,
    pending_callbacks: s.pending_callbacks.length,
    usage: s.usage,
    cost_usd: s.cost_usd,
    tree_usage: s.tree_usage,
    tree_cost_usd: s.tree_cost_usd,
    budget_usd: s.budget_usd,
  };
}

// --- text for models --------------------------------------------------------------------

const cost = (usd: number | null) => (usd === null ? '' : `, $${usd.toFixed(4)}`);
const tokens = (u: Usage | null) => (u === null ? '' : `, ${u.input_tokens} in / ${u.output_tokens} out tokens`);

/** A text in two parts: a headline, and what follows it (empty when there is nothing more). */
export interface Described {
  head: string;
  body: string;
}

export const joined = (d: Described): string => (d.body ? `${d.head}\n${d.body}` : d.head);

/** One line about a job, then its result or error (as much as the view holds). */
export function describeJob(v: JobView): Described {
  const what = v.type === 'start_session' ? 'start' : v.callback_of ? 'delivery resume' : 'resume';
  const head = `Job ${v.job_id} (${what} of session "${v.session_name}"): ${v.status}${tokens(v.usage)}${cost(v.cost_usd)}.`;
  const lines: string[] = [];
  if (v.status === 'pending' && v.pending_reason) lines.push(`Waiting: ${v.pending_reason}.`);
  if (v.result !== null) {
    lines.push('Result:', v.result);
    if (v.result_full_bytes !== undefined) {
      lines.push(`[the result was cut to ${Buffer.byteLength(v.result, 'utf8')} of ${v.result_full_bytes} bytes; the whole of it: \`agentq status ${v.job_id} --json\`]`);
    }
  }
  if (v.error !== null) lines.push(`Error${v.error_code ? ` (${v.error_code})` : ''}: ${v.error}`);
  return { head, body: lines.join('\n') };
}

export function describeSession(v: SessionView): Described {
  const parent = v.parent_session_name ? `, child of "${v.parent_session_name}"` : ', a root session';
  const head = `Session "${v.session_name}"${parent}: ${v.status}${v.active_job_id ? ` (active job ${v.active_job_id})` : ''}.`;
  const lines: string[] = [];
  if (v.last_job_status) lines.push(`Last job: ${v.last_job_status}.`);
  if (v.last_result !== null) {
    lines.push('Last result:', v.last_result);
    if (v.last_result_full_bytes !== undefined) lines.push(`[cut to ${Buffer.byteLength(v.last_result, 'utf8')} of ${v.last_result_full_bytes} bytes]`);
  }
  if (v.last_error !== null) lines.push(`Last error: ${v.last_error}`);
  if (!v.accepts_input) lines.push('It can take no more input (its start never ran).');
  if (v.children_count > v.children.length) {
    lines.push(`Children: ${v.children_count}; the newest ${v.children.length}: ${v.children.join(', ')}. list_children pages through them all.`);
  } else if (v.children.length > 0) {
    lines.push(`Children: ${v.children.join(', ')}.`);
  }
  if (v.pending_messages > 0 || v.pending_callbacks > 0) {
    lines.push(`Waiting to be delivered with its next turn: ${v.pending_messages} message(s), ${v.pending_callbacks} child outcome(s).`);
  }
  lines.push(`Jobs: ${v.job_count}; spent ${tokens(v.usage).slice(2) || 'no tokens'}${cost(v.cost_usd)} (with its descendants: $${v.tree_cost_usd.toFixed(4)}).`);
  return { head, body: lines.join('\n') };
}

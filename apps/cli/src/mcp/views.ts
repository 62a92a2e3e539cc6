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
  /** set when the text is not whole: its full size in bytes */
  full_bytes?: number;
  /** set when the text does not start at the beginning: the byte offset it starts at */
  offset?: number;
  /** set when more follows: the byte offset to read on from (get_status's result_offset) */
  next_offset?: number;
}

/** The first `maxBytes` bytes of `s`, cut on a character boundary. */
export function cutUtf8(s: string, maxBytes: number): string {
  return sliceUtf8(Buffer.from(s, 'utf8'), 0, maxBytes).text;
}

const continuation = (buf: Buffer, i: number) => i < buf.length && (buf[i]! & 0xc0) === 0x80;

/**
 * At most `maxBytes` bytes of `buf` from `offset`, both ends moved onto character boundaries (the
 * start forward, the end back), so that no piece holds half a character and the pieces read one
 * after the other (each from the last one's end) make the whole text.
 */
function sliceUtf8(buf: Buffer, offset: number, maxBytes: number): { text: string; start: number; end: number } {
  let start = Math.min(Math.max(0, offset), buf.length);
  while (continuation(buf, start)) start++;
  let end = Math.min(buf.length, start + Math.max(0, maxBytes));
  while (end > start && continuation(buf, end)) end--;
  return { text: buf.subarray(start, end).toString('utf8'), start, end };
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

/** `text`, or at most `maxBytes` of it from byte `offset`, saying where the piece lies in it. */
export function bounded(text: string | null, maxBytes: number, offset = 0): Bounded {
  if (text === null) return { text: null };
  const buf = Buffer.from(text, 'utf8');
  if (offset === 0 && buf.length <= maxBytes) return { text };
  const { text: piece, start, end } = sliceUtf8(buf, offset, maxBytes);
  return { text: piece, full_bytes: buf.length, ...(start > 0 ? { offset: start } : {}), ...(end < buf.length ? { next_offset: end } : {}) };
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
  /** set when `result` is not whole: the whole result's size */
  result_full_bytes?: number;
  /** set when `result` starts past the beginning (get_status's result_offset) */
  result_offset?: number;
  /** set when more of the result follows: get_status with this result_offset reads on */
  result_next_offset?: number;
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

/**
 * The view of a job. `resultOffset` (get_status): the result from that byte on, with the whole of
 * `resultMaxBytes` to itself, so that a model reads a long result piece by piece.
 */
export function jobView(job: Job, resultMaxBytes = RESULT_MAX_BYTES, resultOffset?: number): JobView {
  // the error first: it is short and says why the job failed; the result has the rest
  const error = bounded(job.error, resultMaxBytes);
  const result =
    resultOffset === undefined
      ? bounded(job.result, resultMaxBytes - Buffer.byteLength(error.text ?? '', 'utf8'))
      : bounded(job.result, resultMaxBytes, resultOffset);
  return {
    job_id: job.job_id,
    type: job.type,
    session_name: job.session_name,
    parent_session_name: job.parent_session_name,
    status: job.status,
    terminal: job.terminal,
    ...(pieceOf('result', result) as Pick<JobView, 'result'>),
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

/** `{ <name>, <name>_full_bytes?, <name>_offset?, <name>_next_offset? }` of a bounded text. */
function pieceOf<N extends string>(name: N, b: Bounded): Record<string, string | number | null> {
  return {
    [name]: b.text,
    ...(b.full_bytes === undefined ? {} : { [`${name}_full_bytes`]: b.full_bytes }),
    ...(b.offset === undefined ? {} : { [`${name}_offset`]: b.offset }),
    ...(b.next_offset === undefined ? {} : { [`${name}_next_offset`]: b.next_offset }),
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
  last_result_offset?: number;
  last_result_next_offset?: number;
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

/** The view of a session; `resultOffset` as for jobView, for its last result. */
export function sessionView(s: Session, resultMaxBytes = RESULT_MAX_BYTES, resultOffset?: number): SessionView {
  // a session keeps its last result and its last error apart (a failed turn after a completed one
  // has both): the error first, as for a job
  const lastError = bounded(s.last_error, resultMaxBytes);
  const last =
    resultOffset === undefined
      ? bounded(s.last_result, resultMaxBytes - Buffer.byteLength(lastError.text ?? '', 'utf8'))
      : bounded(s.last_result, resultMaxBytes, resultOffset);
  return {
    session_name: s.session_name,
    parent_session_name: s.parent_session_name,
    depth: s.depth,
    status: s.status,
    active_job_id: s.active_job_id,
    last_job_status: s.last_job_status,
    ...(pieceOf('last_result', last) as Pick<SessionView, 'last_result'>),
    last_error: lastError.text,
    ...(lastError.full_bytes === undefined ? {} : { last_error_full_bytes: lastError.full_bytes }),
    accepts_input: s.accepts_input,
    children: s.children.slice(-CHILDREN_MAX),
    // the coordinator's lists hold the newest MAX_SESSION_LIST_ITEMS: the counts are its own
    // (a coordinator from before them sends none, and whole lists)
    children_count: s.children_count ?? s.children.length,
    recent_job_ids: s.job_ids.slice(-20),
    job_count: s.job_ids_count ?? s.job_ids.length,
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
    const note = pieceNote('result', v.result, v.result_full_bytes, v.result_offset, v.result_next_offset, `job_id "${v.job_id}"`);
    if (note) lines.push(note);
  }
  if (v.error !== null) {
    lines.push(`Error${v.error_code ? ` (${v.error_code})` : ''}: ${v.error}`);
    if (v.error_full_bytes !== undefined) lines.push(errorNote(v.error, v.error_full_bytes, `agentq status ${v.job_id} --json`));
  }
  return { head, body: lines.join('\n') };
}

/**
 * Where a piece of a result lies in the whole, and how to read on: nothing when the text is whole.
 * `whose`: the get_status argument that names its job or session.
 */
function pieceNote(what: string, text: string, full: number | undefined, offset: number | undefined, next: number | undefined, whose: string): string {
  if (full === undefined) return '';
  const start = offset ?? 0;
  const range = `[bytes ${start}-${start + Buffer.byteLength(text, 'utf8')} of the ${what}'s ${full}`;
  return next === undefined ? `${range}: its end]` : `${range}; the rest: get_status with ${whose} and result_offset ${next}]`;
}

/** What is said under an error that was cut (errors are not read in pieces: they are short but for a rare runaway one). */
function errorNote(text: string, full: number, command: string): string {
  return `[the error was cut to ${Buffer.byteLength(text, 'utf8')} of ${full} bytes; the whole of it: \`${command}\`]`;
}

export function describeSession(v: SessionView): Described {
  const parent = v.parent_session_name ? `, child of "${v.parent_session_name}"` : ', a root session';
  const head = `Session "${v.session_name}"${parent}: ${v.status}${v.active_job_id ? ` (active job ${v.active_job_id})` : ''}.`;
  const lines: string[] = [];
  if (v.last_job_status) lines.push(`Last job: ${v.last_job_status}.`);
  if (v.last_result !== null) {
    lines.push('Last result:', v.last_result);
    const note = pieceNote('last result', v.last_result, v.last_result_full_bytes, v.last_result_offset, v.last_result_next_offset, `session_name "${v.session_name}"`);
    if (note) lines.push(note);
  }
  if (v.last_error !== null) {
    lines.push(`Last error: ${v.last_error}`);
    if (v.last_error_full_bytes !== undefined) lines.push(errorNote(v.last_error, v.last_error_full_bytes, `agentq sessions ${v.session_name} --json`));
  }
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

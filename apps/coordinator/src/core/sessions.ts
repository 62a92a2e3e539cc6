import type { CallbackNotification, JobStatus, Session } from '@agentq/protocol';
import { iso } from './clock.js';
import type { JobRecord } from './job-record.js';

/**
 * A named conversation. At most one of its jobs is active (claimed, running or stopping) at a
 * time; later jobs wait in `pending` (creation order) and only the first of them is offered
 * to launchers, once the active one has ended.
 */
export interface SessionRecord {
  readonly name: string;
  readonly agentName: string | null;
  readonly projectDir: string | null;
  readonly parentName: string | null;
  readonly depth: number;
  readonly createdAt: number;
  updatedAt: number;
  executorSessionId: string | null;
  active: JobRecord | null;
  pending: JobRecord[];
  lastJobStatus: JobStatus | null;
  lastResult: string | null;
  lastError: string | null;
  jobIds: string[];
  children: string[];
  /** child outcomes waiting to be delivered */
  callbacks: CallbackNotification[];
  /** the callback resume job in flight, if any */
  callbackJobId: string | null;
  /**
   * Set when a callback delivery failed: its notifications went back to `callbacks`, and are
   * delivered again with the next child outcome or after the session's next own job, not at
   * once (that would loop on a parent whose every turn fails). Also set when one of the
   * session's own jobs is stopped by request, so a stop is not undone by a callback resume.
   */
  callbacksHeld: boolean;
}

export const isBusy = (s: SessionRecord): boolean => s.active !== null || s.pending.length > 0;

export function toWireSession(s: SessionRecord): Session {
  return {
    session_name: s.name,
    agent_name: s.agentName,
    project_dir: s.projectDir,
    parent_session_name: s.parentName,
    depth: s.depth,
    executor_session_id: s.executorSessionId,
    status: isBusy(s) ? 'busy' : 'idle',
    active_job_id: s.active?.id ?? null,
    last_job_status: s.lastJobStatus,
    last_result: s.lastResult,
    last_error: s.lastError,
    created_at: iso(s.createdAt),
    updated_at: iso(s.updatedAt),
    job_ids: [...s.jobIds],
    children: [...s.children],
    pending_callbacks: [...s.callbacks],
    callback_job_id: s.callbackJobId,
    affinity: null,
    pending_messages: [],
    accepts_input: true,
    created_by: null,
    usage: { input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    cost_usd: 0,
    tree_usage: { input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    tree_cost_usd: 0,
    budget_usd: null,
  };
}

export function newSessionRecord(
  f: { name: string; agentName: string | null; projectDir: string | null; parent: SessionRecord | null },
  now: number,
): SessionRecord {
  return {
    name: f.name,
    agentName: f.agentName,
    projectDir: f.projectDir,
    parentName: f.parent?.name ?? null,
    depth: f.parent ? f.parent.depth + 1 : 0,
    createdAt: now,
    updatedAt: now,
    executorSessionId: null,
    active: null,
    pending: [],
    lastJobStatus: null,
    lastResult: null,
    lastError: null,
    jobIds: [],
    children: [],
    callbacks: [],
    callbackJobId: null,
    callbacksHeld: false,
  };
}

/** The inverse of toWireSession, for a restore: jobs are attached as they are restored. */
export function fromWireSession(w: Session): SessionRecord {
  return {
    name: w.session_name,
    agentName: w.agent_name,
    projectDir: w.project_dir,
    parentName: w.parent_session_name,
    depth: w.depth,
    createdAt: Date.parse(w.created_at),
    updatedAt: Date.parse(w.updated_at),
    executorSessionId: w.executor_session_id,
    active: null,
    pending: [],
    lastJobStatus: w.last_job_status,
    lastResult: w.last_result,
    lastError: w.last_error,
    jobIds: [],
    children: [...w.children],
    callbacks: [...w.pending_callbacks],
    callbackJobId: w.callback_job_id,
    callbacksHeld: false,
  };
}

import { isTerminal, type CallbackNotification, type ChildOutcome, type Job, type Launcher, type Session } from '@agentq/protocol';
import { iso, isoOrNull } from './clock.js';
import type { JobRow, LauncherRow, SessionRow } from './rows.js';

/* The API's view of each row: the only place rows become wire objects. */

export function toWireJob(job: JobRow, pendingReason: string | null = null): Job {
  return {
    job_id: job.id,
    type: job.type,
    session_name: job.sessionName,
    agent_name: job.agentName,
    prompt: job.prompt,
    project_dir: job.projectDir,
    parent_session_name: job.parentSessionName,
    status: job.status,
    launcher_id: job.launcherId,
    error: job.error,
    created_at: iso(job.createdAt),
    claimed_at: isoOrNull(job.claimedAt),
    started_at: isoOrNull(job.startedAt),
    completed_at: isoOrNull(job.completedAt),
    terminal: isTerminal(job.status),
    result: job.result,
    updated_at: iso(job.updatedAt),
    timeout_ms: job.timeoutMs,
    stop_requested_at: isoOrNull(job.stopRequestedAt),
    // a tree stop is a stop by request (rows.ts, StopCause)
    stop_reason: job.stopReason === 'tree' ? 'requested' : job.stopReason,
    executor_session_id: job.executorSessionId,
    callback_of: job.callbackOf ? [...job.callbackOf] : null,
    attempts: job.attempts,
    lost_claims: job.lostClaims,
    output_bytes: job.outputBytes,
    requires: job.requires,
    pending_reason: job.status === 'pending' ? pendingReason : null,
    error_code: job.errorCode,
    created_by: job.createdBy,
    stopped_by: job.stoppedBy,
    message_ids: job.messageIds ? [...job.messageIds] : null,
    usage: job.usage,
    cost_usd: job.costUsd,
    num_turns: job.numTurns,
    duration_api_ms: job.durationApiMs,
    max_cost_usd: job.maxCostUsd,
    seq: job.seq,
  };
}

/** What a session's wire view needs beyond its row (derived by the store). */
export interface SessionExtras {
  activeJobId: string | null;
  busy: boolean;
  /** the newest of its jobs (at most the store's `sessionListMax`), oldest first */
  jobIds: readonly string[];
  /** how many jobs it has in all */
  jobCount: number;
  /** the newest of its children (at most the store's `sessionListMax`), oldest first */
  children: readonly string[];
  /** how many children it has in all */
  childCount: number;
}

/** The last `max` entries of `items`, in order, walked without copying the rest (a Set has no end to start from). */
export function newest(items: ReadonlySet<string> | undefined, max: number): string[] {
  if (items === undefined) return [];
  const skip = items.size - max;
  const out: string[] = [];
  let i = 0;
  for (const item of items) if (i++ >= skip) out.push(item);
  return out;
}

export function toWireSession(s: SessionRow, x: SessionExtras): Session {
  return {
    session_name: s.name,
    agent_name: s.agentName,
    project_dir: s.projectDir,
    parent_session_name: s.parentName,
    depth: s.depth,
    executor_session_id: s.executorSessionId,
    status: x.busy ? 'busy' : 'idle',
    active_job_id: x.activeJobId,
    last_job_status: s.lastJobStatus,
    last_result: s.lastResult,
    last_error: s.lastError,
    created_at: iso(s.createdAt),
    updated_at: iso(s.updatedAt),
    seq: s.seq,
    job_ids: [...x.jobIds],
    job_ids_count: x.jobCount,
    job_ids_truncated: x.jobCount > x.jobIds.length,
    children: [...x.children],
    children_count: x.childCount,
    children_truncated: x.childCount > x.children.length,
    pending_callbacks: [...s.callbacks],
    callback_job_id: s.deliveryJobId,
    // a portable session is bound to no host (only to its executor type, which routing keeps)
    affinity:
      s.affinity && s.affinity.hostId !== null
        ? { host_id: s.affinity.hostId, working_dir: s.affinity.workingDir, executor_type: s.affinity.executorType }
        : null,
    pending_messages: [...s.messages],
    accepts_input: s.acceptsInput,
    created_by: s.createdBy,
    usage: s.usage,
    cost_usd: s.costUsd,
    tree_usage: s.treeUsage,
    tree_cost_usd: s.treeCostUsd,
    budget_usd: s.budgetUsd,
    requires: s.requires,
  };
}

export function toWireLauncher(l: LauncherRow, activeJobIds: readonly string[], now: number): Launcher {
  return {
    launcher_id: l.id,
    hostname: l.hostname,
    project_dir: l.projectDir,
    executor_type: l.executorType,
    max_jobs: l.maxJobs,
    version: l.version,
    registered_at: iso(l.registeredAt),
    last_heartbeat: iso(l.lastSeen),
    seconds_since_heartbeat: Math.max(0, Math.round(now - l.lastSeen) / 1000),
    status: l.status,
    active_jobs: [...activeJobIds],
    labels: l.labels,
    project_roots: [...l.roots],
    host_id: l.hostId,
    portable_sessions: l.portable,
    created_by: l.createdBy,
  };
}

/** How a child's ended job is told to its parent. */
export function notificationOf(job: JobRow, now: number): CallbackNotification {
  return {
    child_session_name: job.sessionName,
    job_id: job.id,
    outcome: job.status as ChildOutcome,
    result: job.result,
    error: job.error,
    ended_at: iso(job.completedAt ?? now),
  };
}

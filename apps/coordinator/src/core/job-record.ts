import {
  canTransition,
  isTerminal,
  type CallbackNotification,
  type ChildOutcome,
  type Job,
  type JobStatus,
  type JobType,
  type StopReason,
} from '@agentq/protocol';
import { isoOrNull, iso } from './clock.js';
import { invalidTransition } from './errors.js';
import { OutputBuffer } from './output-buffer.js';
import type { QueueLinks } from './ready-queue.js';

/** The coordinator's own, mutable record of a job. `toWireJob` makes the API's view of it. */
export interface JobRecord extends QueueLinks<JobRecord> {
  readonly seq: number;
  readonly id: string;
  readonly type: JobType;
  readonly sessionName: string;
  readonly agentName: string | null;
  readonly prompt: string;
  readonly projectDir: string | null;
  readonly parentSessionName: string | null;
  readonly createdAt: number;
  readonly timeoutMs: number | null;
  readonly callbackOf: string[] | null;
  /** name of the token that created it (null: auth off, or made by the coordinator) */
  readonly createdBy: string | null;
  /** name of the token that asked for its stop */
  stoppedBy: string | null;
  status: JobStatus;
  launcherId: string | null;
  error: string | null;
  result: string | null;
  claimedAt: number | null;
  startedAt: number | null;
  completedAt: number | null;
  updatedAt: number;
  stopRequestedAt: number | null;
  stopReason: StopReason | null;
  executorSessionId: string | null;
  attempts: number;
  output: OutputBuffer;
}

/**
 * The single place where a job's status changes: checks the transition table, stamps
 * `updated_at` (and `completed_at` on reaching a terminal status).
 */
export function transition(job: JobRecord, to: JobStatus, now: number): void {
  if (!canTransition(job.status, to)) throw invalidTransition(job.id, job.status, to);
  job.status = to;
  job.updatedAt = now;
  if (isTerminal(to)) job.completedAt = now;
}

export function toWireJob(job: JobRecord): Job {
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
    stop_reason: job.stopReason,
    executor_session_id: job.executorSessionId,
    callback_of: job.callbackOf,
    attempts: job.attempts,
    output_bytes: job.output.totalBytes,
    requires: null,
    pending_reason: null,
    error_code: null,
    created_by: job.createdBy,
    stopped_by: job.stoppedBy,
    message_ids: null,
    usage: null,
    cost_usd: null,
    num_turns: null,
    duration_api_ms: null,
    max_cost_usd: null,
  };
}

/** What a new job is made of; its state starts empty (`pending`, no launcher, no output). */
export interface NewJob {
  seq: number;
  id: string;
  type: JobType;
  sessionName: string;
  agentName: string | null;
  prompt: string;
  projectDir: string | null;
  parentSessionName: string | null;
  createdAt: number;
  timeoutMs: number | null;
  callbackOf: string[] | null;
  createdBy?: string | null;
}

export function newJobRecord(f: NewJob, outputMaxBytes: number): JobRecord {
  return {
    ...f,
    createdBy: f.createdBy ?? null,
    stoppedBy: null,
    status: 'pending',
    launcherId: null,
    error: null,
    result: null,
    claimedAt: null,
    startedAt: null,
    completedAt: null,
    updatedAt: f.createdAt,
    stopRequestedAt: null,
    stopReason: null,
    executorSessionId: null,
    attempts: 0,
    output: new OutputBuffer(outputMaxBytes),
    prev: null,
    next: null,
    queued: false,
  };
}

const ms = (x: string | null): number | null => (x === null ? null : Date.parse(x));

/** The inverse of toWireJob, for a restore. Output is not journaled: it starts empty. */
export function fromWireJob(w: Job, seq: number, outputMaxBytes: number): JobRecord {
  const job = newJobRecord(
    {
      seq,
      id: w.job_id,
      type: w.type,
      sessionName: w.session_name,
      agentName: w.agent_name,
      prompt: w.prompt,
      projectDir: w.project_dir,
      parentSessionName: w.parent_session_name,
      createdAt: Date.parse(w.created_at),
      timeoutMs: w.timeout_ms,
      callbackOf: w.callback_of,
      createdBy: w.created_by,
    },
    outputMaxBytes,
  );
  job.status = w.status;
  job.launcherId = w.launcher_id;
  job.error = w.error;
  job.result = w.result;
  job.claimedAt = ms(w.claimed_at);
  job.startedAt = ms(w.started_at);
  job.completedAt = ms(w.completed_at);
  job.updatedAt = Date.parse(w.updated_at);
  job.stopRequestedAt = ms(w.stop_requested_at);
  job.stopReason = w.stop_reason;
  job.executorSessionId = w.executor_session_id;
  job.attempts = w.attempts;
  job.stoppedBy = w.stopped_by ?? null; // absent in journals written before audit fields
  return job;
}

/** How a child's ended job is told to its parent. */
export function notificationOf(job: JobRecord, now: number): CallbackNotification {
  return {
    child_session_name: job.sessionName,
    job_id: job.id,
    outcome: job.status as ChildOutcome,
    result: job.result,
    error: job.error,
    ended_at: iso(job.completedAt ?? now),
  };
}

import { canTransition, isTerminal, type Job, type JobStatus, type JobType, type StopReason } from '@agentq/protocol';
import { isoOrNull, iso } from './clock.js';
import { invalidTransition } from './errors.js';
import type { OutputBuffer } from './output-buffer.js';
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
  };
}

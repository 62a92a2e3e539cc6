import { Type, type Static } from '@sinclair/typebox';
import { IdParam, JobId, Nullable, Timestamp } from './common.js';
import { JobStatus, StopOutcome } from './jobs.js';

/** How deep a parent chain may go (seed 003's MaxAgentDepth): a root session is depth 0. */
export const MAX_SESSION_DEPTH = 5;

export const SessionStatus = Type.Union([Type.Literal('idle'), Type.Literal('busy')]);
export type SessionStatus = Static<typeof SessionStatus>;

/** How a child job ended, as told to its parent. */
export const ChildOutcome = Type.Union([
  Type.Literal('completed'),
  Type.Literal('failed'),
  Type.Literal('stopped'),
  Type.Literal('interrupted'),
  Type.Literal('timed_out'),
]);
export type ChildOutcome = Static<typeof ChildOutcome>;

/** One child's outcome, waiting to be (or being) delivered to its parent. */
export const CallbackNotification = Type.Object({
  child_session_name: Type.String(),
  job_id: JobId,
  outcome: ChildOutcome,
  result: Nullable(Type.String()),
  error: Nullable(Type.String()),
  ended_at: Timestamp,
});
export type CallbackNotification = Static<typeof CallbackNotification>;

export const Session = Type.Object({
  session_name: Type.String(),
  agent_name: Nullable(Type.String()),
  project_dir: Nullable(Type.String()),
  parent_session_name: Nullable(Type.String()),
  /** 0 for a root session, parent's depth + 1 otherwise (at most MAX_SESSION_DEPTH) */
  depth: Type.Integer(),
  executor_session_id: Nullable(Type.String()),
  status: SessionStatus,
  active_job_id: Nullable(JobId),
  last_job_status: Nullable(JobStatus),
  last_result: Nullable(Type.String()),
  last_error: Nullable(Type.String()),
  created_at: Timestamp,
  updated_at: Timestamp,
  job_ids: Type.Array(JobId),
  children: Type.Array(Type.String()),
  /** notifications waiting for the parent to become idle */
  pending_callbacks: Type.Array(CallbackNotification),
  /** the callback resume job currently delivering notifications, if any */
  callback_job_id: Nullable(JobId),
});
export type Session = Static<typeof Session>;

export const ListSessionsQuery = Type.Object(
  {
    status: Type.Optional(SessionStatus),
    parent: Type.Optional(Type.String({ description: 'only children of this session' })),
  },
  { additionalProperties: false },
);
export type ListSessionsQuery = Static<typeof ListSessionsQuery>;

export const SessionList = Type.Object({ sessions: Type.Array(Session) });
export type SessionList = Static<typeof SessionList>;

export const SessionNameParams = Type.Object({ session_name: IdParam });

export const StopSessionResponse = Type.Object({
  session_name: Type.String(),
  stopped: Type.Array(Type.Object({ job_id: JobId, outcome: StopOutcome, status: JobStatus })),
});
export type StopSessionResponse = Static<typeof StopSessionResponse>;

import { Type, type Static } from '@sinclair/typebox';
import { IdParam, LauncherId, Nullable, Timestamp } from './common.js';
import { Job } from './jobs.js';

export const RegisterLauncherRequest = Type.Object(
  {
    hostname: Type.Optional(Type.String({ maxLength: 255 })),
    project_dir: Type.Optional(Nullable(Type.String({ maxLength: 4096 }))),
    executor_type: Type.Optional(Type.String({ maxLength: 255 })),
    max_jobs: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    version: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: false },
);
export type RegisterLauncherRequest = Static<typeof RegisterLauncherRequest>;

export const RegisterLauncherResponse = Type.Object({
  launcher_id: LauncherId,
  poll_endpoint: Type.String(),
  poll_timeout_seconds: Type.Number(),
  heartbeat_interval_seconds: Type.Number(),
  /** a job claimed but not reported `started` within this many seconds goes back to the queue */
  claim_lease_seconds: Type.Number(),
});
export type RegisterLauncherResponse = Static<typeof RegisterLauncherResponse>;

export const PollQuery = Type.Object(
  {
    launcher_id: Type.String({ minLength: 1, maxLength: 200 }),
    capacity: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 1000,
        default: 1,
        description: '0: the launcher is full; the poll only waits for stop requests or deregistration',
      }),
    ),
  },
  { additionalProperties: false },
);
export type PollQuery = Static<typeof PollQuery>;

/** A 200 answer to a poll: a job, stop requests, or the deregistration notice (204 = nothing). */
export const PollResponse = Type.Object({
  job: Type.Optional(Job),
  stop_jobs: Type.Optional(Type.Array(Type.String())),
  deregistered: Type.Optional(Type.Literal(true)),
});
export type PollResponse = Static<typeof PollResponse>;

export const LauncherIdBody = Type.Object({ launcher_id: Type.String({ minLength: 1, maxLength: 200 }) });

export const HeartbeatRequest = Type.Object(
  {
    launcher_id: Type.String({ minLength: 1, maxLength: 200 }),
    running_jobs: Type.Optional(Type.Array(Type.String(), { maxItems: 10_000 })),
  },
  { additionalProperties: false },
);
export type HeartbeatRequest = Static<typeof HeartbeatRequest>;

export const HeartbeatResponse = Type.Object({
  ok: Type.Literal(true),
  /** jobs of this launcher that are `stopping`: a safety net for a lost poll answer */
  stop_jobs: Type.Array(Type.String()),
});
export type HeartbeatResponse = Static<typeof HeartbeatResponse>;

const ExecutorSessionId = Type.String({ minLength: 1, maxLength: 500 });

export const StartedReport = Type.Object(
  { launcher_id: Type.String({ minLength: 1 }), executor_session_id: Type.Optional(ExecutorSessionId) },
  { additionalProperties: false },
);
export type StartedReport = Static<typeof StartedReport>;

export const CompletedReport = Type.Object(
  {
    launcher_id: Type.String({ minLength: 1 }),
    status: Type.Optional(Type.Literal('success')),
    result: Type.Optional(Nullable(Type.String())),
    executor_session_id: Type.Optional(ExecutorSessionId),
  },
  { additionalProperties: false },
);
export type CompletedReport = Static<typeof CompletedReport>;

export const FailedReport = Type.Object(
  {
    launcher_id: Type.String({ minLength: 1 }),
    error: Type.String({ minLength: 1 }),
    exit_code: Type.Optional(Nullable(Type.Integer())),
    executor_session_id: Type.Optional(ExecutorSessionId),
  },
  { additionalProperties: false },
);
export type FailedReport = Static<typeof FailedReport>;

export const StoppedReport = Type.Object(
  {
    launcher_id: Type.String({ minLength: 1 }),
    signal: Type.Optional(Nullable(Type.String({ description: 'the signal that ended the executor, if any' }))),
    error: Type.Optional(Nullable(Type.String())),
    executor_session_id: Type.Optional(ExecutorSessionId),
  },
  { additionalProperties: false },
);
export type StoppedReport = Static<typeof StoppedReport>;

export const OutputReport = Type.Object(
  {
    launcher_id: Type.String({ minLength: 1 }),
    /** byte offset of `data` in the job's output stream; a retried batch is not stored twice */
    offset: Type.Integer({ minimum: 0 }),
    data: Type.String(),
  },
  { additionalProperties: false },
);
export type OutputReport = Static<typeof OutputReport>;

export const ReportKinds = ['started', 'completed', 'failed', 'stopped', 'output'] as const;
export type ReportKind = (typeof ReportKinds)[number];

export const LauncherStatus = Type.Union([Type.Literal('online'), Type.Literal('stale'), Type.Literal('deregistering')]);
export type LauncherStatus = Static<typeof LauncherStatus>;

export const Launcher = Type.Object({
  launcher_id: LauncherId,
  hostname: Nullable(Type.String()),
  project_dir: Nullable(Type.String()),
  executor_type: Nullable(Type.String()),
  max_jobs: Nullable(Type.Integer()),
  version: Nullable(Type.String()),
  registered_at: Timestamp,
  last_heartbeat: Timestamp,
  seconds_since_heartbeat: Type.Number(),
  status: LauncherStatus,
  /** jobs this launcher holds (claimed, running or stopping) */
  active_jobs: Type.Array(Type.String()),
});
export type Launcher = Static<typeof Launcher>;

export const LauncherList = Type.Object({ launchers: Type.Array(Launcher) });
export type LauncherList = Static<typeof LauncherList>;

export const LauncherIdParams = Type.Object({ launcher_id: IdParam });
export const DeleteLauncherQuery = Type.Object(
  { self: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])) },
  { additionalProperties: false },
);
export const DeleteLauncherResponse = Type.Object({
  ok: Type.Literal(true),
  launcher_id: Type.String(),
  /** `deregistering`: the launcher is told on its next poll; `removed`: gone at once */
  outcome: Type.Union([Type.Literal('deregistering'), Type.Literal('removed')]),
});
export type DeleteLauncherResponse = Static<typeof DeleteLauncherResponse>;

export const Health = Type.Object({
  status: Type.Literal('ok'),
  uptime_seconds: Type.Number(),
  queue_depth: Type.Integer({ description: 'pending jobs' }),
  jobs_active: Type.Integer({ description: 'claimed, running or stopping jobs' }),
  launchers: Type.Object({ online: Type.Integer(), stale: Type.Integer(), parked_polls: Type.Integer() }),
});
export type Health = Static<typeof Health>;

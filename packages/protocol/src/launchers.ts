import { Type, type Static } from '@sinclair/typebox';
import { CostUsd, IdParam, Labels, LauncherId, Nullable, Timestamp, Usage } from './common.js';
import { Job, JobErrorCode, MAX_OUTPUT_OFFSET } from './jobs.js';

/** At most this many launchers in a registration's `replaces`. */
export const MAX_REPLACES = 64;

export const RegisterLauncherRequest = Type.Object(
  {
    hostname: Type.Optional(Type.String({ maxLength: 255 })),
    project_dir: Type.Optional(Nullable(Type.String({ maxLength: 4096 }))),
    executor_type: Type.Optional(Type.String({ maxLength: 255 })),
    max_jobs: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    version: Type.Optional(Type.String({ maxLength: 100 })),
    labels: Type.Optional(Labels),
    project_roots: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 4096 }), {
        maxItems: 64,
        description: 'directories this launcher serves (resolved); the first is its default',
      }),
    ),
    host_id: Type.Optional(
      Type.String({
        pattern: '^[A-Za-z0-9_-]{8,128}$',
        description: 'stable identity of the host (kept in the launcher state directory across restarts)',
      }),
    ),
    portable_sessions: Type.Optional(
      Type.Boolean({ description: "true when the executor's sessions can resume on any host (no session affinity)" }),
    ),
    replaces: Type.Optional(
      Type.Array(LauncherId, {
        maxItems: MAX_REPLACES,
        description:
          'launchers of earlier lives of this launcher (same host_id, registered with the same token) that are gone: ' +
          'removed at once, their claimed jobs back to the queue, their running jobs interrupted',
      }),
    ),
    registration_key: Type.Optional(
      Type.String({
        pattern: '^[A-Za-z0-9_-]{16,128}$',
        description:
          'a random key the launcher makes for one registration and sends again on each retry of it (an answer lost): ' +
          'while the launcher registered with it (by the same token) is online, the same key answers that launcher again ' +
          'instead of registering another; once it is stale or gone, the key registers a new launcher',
      }),
    ),
  },
  { additionalProperties: false },
);
export type RegisterLauncherRequest = Static<typeof RegisterLauncherRequest>;

/**
 * The coordinator's limits a launcher goes by, in its registration answer and again in every
 * heartbeat answer (a coordinator restarted on a persistent store with other limits still knows
 * the launcher, which does not register again to hear them). Each is absent from coordinators
 * older than it.
 */
const COORDINATOR_LIMITS = {
  /**
   * The largest request body the coordinator takes, in bytes: a report (or a sync carrying one)
   * must fit in it. A launcher cuts a result that would not (docs/launcher.md).
   */
  max_report_bytes: Type.Optional(Type.Integer({ minimum: 1 })),
  /**
   * The most of a job's output the coordinator keeps (JOB_OUTPUT_MAX_BYTES): the newest bytes. A
   * launcher sends no more of a cut result's rest than this (docs/launcher.md).
   */
  max_output_bytes: Type.Optional(Type.Integer({ minimum: 1 })),
};

export const RegisterLauncherResponse = Type.Object({
  launcher_id: LauncherId,
  poll_endpoint: Type.String(),
  poll_timeout_seconds: Type.Number(),
  heartbeat_interval_seconds: Type.Number(),
  /** a job claimed but not reported `started` within this many seconds goes back to the queue */
  claim_lease_seconds: Type.Number(),
  /** the launcher's own credential: the bearer token of every later launcher call (when auth is on) */
  launcher_token: Type.Optional(Type.String()),
  /** the launchers of `replaces` that were removed (those unknown, or of another host or token, are not) */
  replaced: Type.Optional(Type.Array(LauncherId)),
  ...COORDINATOR_LIMITS,
});
export type RegisterLauncherResponse = Static<typeof RegisterLauncherResponse>;
/** The limits of COORDINATOR_LIMITS, as a launcher keeps them. */
export type CoordinatorLimits = Pick<RegisterLauncherResponse, keyof typeof COORDINATOR_LIMITS>;

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
    batch: Type.Optional(
      Type.Union([Type.Literal('true'), Type.Literal('false')], {
        description:
          'true: answer up to `capacity` jobs at once in `jobs`. Without it one job at most (`job`), as launchers that read only `job` expect',
      }),
    ),
  },
  { additionalProperties: false },
);
export type PollQuery = Static<typeof PollQuery>;

/**
 * Per-job agent tokens (auth on): `{job_id: token}` for the jobs handed out by this answer. The
 * launcher gives each job's executor its token as AGENTQ_TOKEN; it may only act on the job's
 * session and its descendants, and stops working when the job ends. Kept beside the jobs, never on
 * the Job object (which `GET /jobs` shows to others).
 */
export const AgentTokens = Type.Record(Type.String(), Type.String(), {
  description: 'job_id -> the per-job agent token (authentication on only)',
});
export type AgentTokens = Static<typeof AgentTokens>;

/** A 200 answer to a poll: a job, stop requests, or the deregistration notice (204 = nothing). */
export const PollResponse = Type.Object({
  /** the oldest claimable job (kept for launchers that ask for one at a time) */
  job: Type.Optional(Job),
  /** every job handed out by this answer, oldest first, at most `capacity` (job is jobs[0]) */
  jobs: Type.Optional(Type.Array(Job)),
  stop_jobs: Type.Optional(Type.Array(Type.String())),
  deregistered: Type.Optional(Type.Literal(true)),
  agent_tokens: Type.Optional(AgentTokens),
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
  /**
   * jobs of this launcher that are `stopping` (a safety net for a lost poll answer), and jobs of
   * `running_jobs` it does not hold any more (ended, requeued, another launcher's, unknown)
   */
  stop_jobs: Type.Array(Type.String()),
  /** the coordinator's limits, as at registration, told again at every beat */
  ...COORDINATOR_LIMITS,
});
export type HeartbeatResponse = Static<typeof HeartbeatResponse>;

const ExecutorSessionId = Type.String({ minLength: 1, maxLength: 500 });

/** What an executor reported about the cost of a job (all optional). */
const Accounting = {
  usage: Type.Optional(Usage),
  cost_usd: Type.Optional(CostUsd),
  num_turns: Type.Optional(Type.Integer({ minimum: 0, maximum: 1e9 })),
  duration_api_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 1e12 })),
};

export const StartedReport = Type.Object(
  {
    launcher_id: Type.String({ minLength: 1 }),
    executor_session_id: Type.Optional(ExecutorSessionId),
    working_dir: Type.Optional(
      Type.String({ minLength: 1, maxLength: 4096, description: 'the resolved directory the executor runs in' }),
    ),
  },
  { additionalProperties: false },
);
export type StartedReport = Static<typeof StartedReport>;

export const CompletedReport = Type.Object(
  {
    launcher_id: Type.String({ minLength: 1 }),
    status: Type.Optional(Type.Literal('success')),
    result: Type.Optional(Nullable(Type.String())),
    executor_session_id: Type.Optional(ExecutorSessionId),
    ...Accounting,
  },
  { additionalProperties: false },
);
export type CompletedReport = Static<typeof CompletedReport>;

export const FailedReport = Type.Object(
  {
    launcher_id: Type.String({ minLength: 1 }),
    error: Type.String({ minLength: 1 }),
    exit_code: Type.Optional(Nullable(Type.Integer({ minimum: -1e6, maximum: 1e6 }))),
    executor_session_id: Type.Optional(ExecutorSessionId),
    error_code: Type.Optional(JobErrorCode),
    ...Accounting,
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
    ...Accounting,
  },
  { additionalProperties: false },
);
export type StoppedReport = Static<typeof StoppedReport>;

export const OutputReport = Type.Object(
  {
    launcher_id: Type.String({ minLength: 1 }),
    /** byte offset of `data` in the job's output stream; a retried batch is not stored twice */
    offset: Type.Integer({ minimum: 0, maximum: MAX_OUTPUT_OFFSET }),
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
  labels: Labels,
  project_roots: Type.Array(Type.String()),
  host_id: Nullable(Type.String()),
  portable_sessions: Type.Boolean(),
  /** name of the token it registered with (null when auth is off) */
  created_by: Nullable(Type.String()),
});
export type Launcher = Static<typeof Launcher>;

/** The largest page of `GET /launchers` a client may ask for (`limit`). */
export const MAX_LAUNCHERS_PAGE = 1000;

/*
 * `GET /launchers` pages in registration order (oldest first, launchers registered at the same
 * instant by id), as the list always came. Without `limit` the answer is every launcher (from
 * `cursor` on), as before paging: a script or dashboard that predates it is never cut short
 * (`next_cursor` is null then). Unknown parameters are ignored, as they were before the route
 * took any, so that a request that worked then still does.
 */
export const ListLaunchersQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({ minimum: 1, maximum: MAX_LAUNCHERS_PAGE, description: 'launchers per page; without it, every launcher (from cursor on)' }),
  ),
  cursor: Type.Optional(Type.String({ maxLength: 200, description: 'next_cursor of the previous page' })),
});
export type ListLaunchersQuery = Static<typeof ListLaunchersQuery>;

export const LauncherList = Type.Object({
  launchers: Type.Array(Launcher),
  /** pass as `cursor` for the next page; null on the last. Absent from coordinators older than paging (their list is whole). */
  next_cursor: Type.Optional(Nullable(Type.String())),
});
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

const StoreCount = (description: string) => Type.Union([Type.Integer(), Type.Null()], { description: `${description}; null while the store cannot be read` });

export const Health = Type.Object({
  status: Type.Literal('ok'),
  uptime_seconds: Type.Number(),
  store: Type.Union([Type.Literal('ok'), Type.Literal('unavailable')], {
    description: 'whether the counts could be read from the store (the database); the coordinator is alive either way',
  }),
  queue_depth: StoreCount('pending jobs'),
  jobs_active: StoreCount('claimed, running or stopping jobs'),
  launchers: Type.Object({ online: StoreCount('online launchers'), stale: StoreCount('stale launchers'), parked_polls: Type.Integer() }),
  overloaded: Type.Boolean({
    description: 'the overload protection is refusing requests (503 overloaded) now; `/health` itself is always answered',
  }),
});
export type Health = Static<typeof Health>;

/** `GET /ready`: 200 while the coordinator takes requests; 503 `overloaded` or `shutting_down` otherwise. */
export const Ready = Type.Object({ ready: Type.Literal(true) });
export type Ready = Static<typeof Ready>;

/*
 * Report-and-poll: `POST /launcher/sync` carries a launcher's reports and receives new work in
 * the same answer. Each report has the fields of its single-report endpoint (without
 * `launcher_id`, which is the one at the top) plus `job_id` and `kind`.
 */
const reportOf = <K extends string, P extends Record<string, import('@sinclair/typebox').TSchema>>(kind: K, props: P) =>
  Type.Object({ job_id: Type.String({ minLength: 1, maxLength: 200 }), kind: Type.Literal(kind), ...props }, {
    additionalProperties: false,
  });
const { launcher_id: _s, ...startedProps } = StartedReport.properties;
const { launcher_id: _c, ...completedProps } = CompletedReport.properties;
const { launcher_id: _f, ...failedProps } = FailedReport.properties;
const { launcher_id: _t, ...stoppedProps } = StoppedReport.properties;
const { launcher_id: _o, ...outputProps } = OutputReport.properties;
export const SyncReport = Type.Union([
  reportOf('started', startedProps),
  reportOf('completed', completedProps),
  reportOf('failed', failedProps),
  reportOf('stopped', stoppedProps),
  reportOf('output', outputProps),
]);
export type SyncReport = Static<typeof SyncReport>;

export const MAX_SYNC_REPORTS = 1000;
export const SyncRequest = Type.Object(
  {
    launcher_id: Type.String({ minLength: 1, maxLength: 200 }),
    capacity: Type.Integer({ minimum: 0, maximum: 1000 }),
    reports: Type.Array(SyncReport, { maxItems: MAX_SYNC_REPORTS }),
  },
  { additionalProperties: false },
);
export type SyncRequest = Static<typeof SyncRequest>;

export const SyncResult = Type.Object({
  job_id: Type.String(),
  kind: Type.String(),
  ok: Type.Boolean(),
  /** why the report was refused (the body a single-report endpoint would have answered) */
  error: Type.Optional(
    Type.Object({
      code: Type.String(),
      message: Type.String(),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    }),
  ),
});
export type SyncResult = Static<typeof SyncResult>;

export const SyncResponse = Type.Object({
  jobs: Type.Array(Job),
  stop_jobs: Type.Optional(Type.Array(Type.String())),
  deregistered: Type.Optional(Type.Literal(true)),
  agent_tokens: Type.Optional(AgentTokens),
  /** one per report, in report order */
  results: Type.Array(SyncResult),
});
export type SyncResponse = Static<typeof SyncResponse>;

import { Type, type Static } from '@sinclair/typebox';
import { BoolString, CostUsd, JobId, Labels, Nullable, Timestamp, Usage } from './common.js';

/*
 * Job lifecycle. Every status change goes through JOB_TRANSITIONS (one table).
 *
 *   pending ──claim──► claimed ──started──► running ──► completed | failed
 *      ▲                  │  └────────────────────────► completed | failed
 *      └── requeue ───────┘   (lease expired / launcher lost before `started`)
 *   claimed ── JOB_MAX_CLAIMS-th claim lost so ──► failed (error_code claim_attempts_exhausted)
 *
 *   pending ── stop ──► stopped              pending ── timeout ──► timed_out
 *   pending ── no matching launcher for JOB_SCHEDULE_TIMEOUT ──► failed (error_code no_matching_launcher)
 *   claimed | running ── stop / timeout ──► stopping ──► stopped | timed_out
 *   running | stopping ── launcher lost ──► interrupted
 *
 * Terminal: completed, failed, stopped, interrupted, timed_out.
 */
export const JobStatuses = [
  'pending',
  'claimed',
  'running',
  'stopping',
  'completed',
  'failed',
  'stopped',
  'interrupted',
  'timed_out',
] as const;
export const JobStatus = Type.Union(JobStatuses.map((s) => Type.Literal(s)));
export type JobStatus = (typeof JobStatuses)[number];

export const TERMINAL_STATUSES: ReadonlySet<JobStatus> = new Set([
  'completed',
  'failed',
  'stopped',
  'interrupted',
  'timed_out',
]);
export const isTerminal = (status: JobStatus): boolean => TERMINAL_STATUSES.has(status);

/** Allowed transitions, written once. `from -> [to...]`. */
export const JOB_TRANSITIONS: { readonly [S in JobStatus]: readonly JobStatus[] } = {
  pending: ['claimed', 'stopped', 'timed_out', 'failed'],
  claimed: ['running', 'completed', 'failed', 'pending', 'stopping'],
  running: ['completed', 'failed', 'stopping', 'interrupted'],
  stopping: ['stopped', 'timed_out', 'completed', 'failed', 'interrupted'],
  completed: [],
  failed: [],
  stopped: [],
  interrupted: [],
  timed_out: [],
};
export const canTransition = (from: JobStatus, to: JobStatus): boolean => JOB_TRANSITIONS[from].includes(to);

export const JobTypes = ['start_session', 'resume_session'] as const;
export const JobType = Type.Union(JobTypes.map((t) => Type.Literal(t)));
export type JobType = (typeof JobTypes)[number];

/** Why a job was asked to stop. */
export const StopReason = Type.Union([Type.Literal('requested'), Type.Literal('timeout')]);
export type StopReason = Static<typeof StopReason>;

export const SessionName = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });

/** Upper bounds of numbers on the wire: every number has one. */
export const MAX_TIMEOUT_MS = 30 * 24 * 60 * 60 * 1000;
/** largest byte offset in a job's output stream (1 TiB) */
export const MAX_OUTPUT_OFFSET = 2 ** 40;

/** A machine-readable error code on a failed job (`executor_idle`, `no_matching_launcher`, ...). */
export const JobErrorCode = Type.String({ pattern: '^[a-z][a-z0-9_]{0,63}$' });

/**
 * A job's or session's place in creation order, which the lists page by (newest first; a page's
 * `next_cursor` is its last row's). Rows created at the same instant (a batch) share `created_at`:
 * this tells their order as the lists give it. Left out by coordinators from before it (and in
 * events they stored).
 */
export const ListOrder = Type.Integer({
  minimum: 0,
  maximum: Number.MAX_SAFE_INTEGER,
  description: 'creation order, as the lists page by it (newest first): orders rows of equal created_at',
});

/** The job object: every field of the original Jobs API's data model, plus additive extensions. */
export const Job = Type.Object(
  {
    job_id: JobId,
    type: JobType,
    session_name: Type.String(),
    agent_name: Nullable(Type.String()),
    prompt: Type.String(),
    project_dir: Nullable(Type.String()),
    parent_session_name: Nullable(Type.String()),
    status: JobStatus,
    launcher_id: Nullable(Type.String()),
    error: Nullable(Type.String()),
    created_at: Timestamp,
    claimed_at: Nullable(Timestamp),
    started_at: Nullable(Timestamp),
    completed_at: Nullable(Timestamp),
    // --- extensions ---
    terminal: Type.Boolean({ description: 'true once the status can no longer change' }),
    result: Nullable(Type.String({ description: "the agent's final answer, from the `completed` report" })),
    updated_at: Timestamp,
    timeout_ms: Nullable(Type.Integer({ description: 'the job ends as timed_out this long after created_at' })),
    stop_requested_at: Nullable(Timestamp),
    stop_reason: Nullable(StopReason),
    executor_session_id: Nullable(
      Type.String({ description: "the executor's own session id (e.g. Claude Code's session_id), for resume" }),
    ),
    callback_of: Nullable(Type.Array(JobId, { description: 'child jobs whose outcome this callback resume delivers' })),
    attempts: Type.Integer({ description: 'how many times the job has been claimed' }),
    lost_claims: Type.Integer({
      minimum: 0,
      description:
        'claims that ended without a start by lease expiry or a lost launcher; the job fails claim_attempts_exhausted at JOB_MAX_CLAIMS',
    }),
    output_bytes: Type.Integer({ description: 'total bytes of output received so far' }),
    requires: Nullable(Labels),
    pending_reason: Nullable(
      Type.String({ description: 'why a pending job has not been taken yet (no matching launcher online, ...)' }),
    ),
    error_code: Nullable(JobErrorCode),
    created_by: Nullable(Type.String({ description: 'name of the token that created the job' })),
    stopped_by: Nullable(Type.String({ description: 'name of the token that asked for the stop' })),
    message_ids: Nullable(Type.Array(Type.String(), { description: 'messages this resume job delivers' })),
    usage: Nullable(Usage),
    cost_usd: Nullable(CostUsd),
    num_turns: Nullable(Type.Integer({ minimum: 0 })),
    duration_api_ms: Nullable(Type.Integer({ minimum: 0 })),
    max_cost_usd: Nullable(CostUsd),
    seq: Type.Optional(ListOrder),
  },
  { description: 'A job: one agent turn to run on a launcher' },
);
export type Job = Static<typeof Job>;

export const CreateJobRequest = Type.Object(
  {
    type: JobType,
    session_name: SessionName,
    prompt: Type.String({ minLength: 1 }),
    // "" is accepted as none: the seed's dashboard sends `project_dir: projectDir` from a form field
    agent_name: Type.Optional(Nullable(Type.String({ maxLength: 200, description: 'empty or null: none (a resume keeps the session\'s)' }))),
    project_dir: Type.Optional(Nullable(Type.String({ maxLength: 4096, description: 'empty or null: none (a resume keeps the session\'s)' }))),
    parent_session_name: Type.Optional(Nullable(SessionName)),
    timeout_ms: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: MAX_TIMEOUT_MS }))),
    requires: Type.Optional(Nullable(Labels)),
    max_cost_usd: Type.Optional(Nullable(Type.Number({ exclusiveMinimum: 0, maximum: 1e6 }))),
    budget_usd: Type.Optional(
      Nullable(
        Type.Number({
          exclusiveMinimum: 0,
          maximum: 1e6,
          description: 'start_session only: the budget of the tree this session roots; child jobs are refused once it is spent',
        }),
      ),
    ),
  },
  { additionalProperties: false },
);
export type CreateJobRequest = Static<typeof CreateJobRequest>;

/** `POST /jobs/batch`: up to 1,000 jobs, created all or none. */
export const MAX_BATCH_JOBS = 1000;
export const CreateJobsRequest = Type.Object(
  { jobs: Type.Array(CreateJobRequest, { minItems: 1, maxItems: MAX_BATCH_JOBS }) },
  { additionalProperties: false },
);
export type CreateJobsRequest = Static<typeof CreateJobsRequest>;
export const CreateJobsResponse = Type.Object({ jobs: Type.Array(Job) });
export type CreateJobsResponse = Static<typeof CreateJobsResponse>;

export const JobIdParams = Type.Object({ job_id: Type.String({ minLength: 1, maxLength: 200 }) });
export type JobIdParams = Static<typeof JobIdParams>;

export const ListJobsQuery = Type.Object(
  {
    status: Type.Optional(Type.String({ description: 'comma-separated statuses' })),
    session_name: Type.Optional(Type.String()),
    launcher_id: Type.Optional(Type.String()),
    terminal: Type.Optional(BoolString),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
    cursor: Type.Optional(Type.String({ description: 'next_cursor of the previous page' })),
  },
  { additionalProperties: false },
);
export type ListJobsQuery = Static<typeof ListJobsQuery>;

export const JobList = Type.Object({ jobs: Type.Array(Job), next_cursor: Nullable(Type.String()) });
export type JobList = Static<typeof JobList>;

export const WaitQuery = Type.Object(
  { timeout_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 3_600_000, default: 30_000 })) },
  { additionalProperties: false },
);
export type WaitQuery = Static<typeof WaitQuery>;

export const WaitMode = Type.Union([Type.Literal('any'), Type.Literal('all')]);
export type WaitMode = Static<typeof WaitMode>;

/** `POST /jobs/wait`: the most job ids one request takes (a client waits on more in groups). */
export const MAX_WAIT_JOB_IDS = 1000;
export const WaitManyRequest = Type.Object(
  {
    job_ids: Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { minItems: 1, maxItems: MAX_WAIT_JOB_IDS }),
    timeout_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 3_600_000, default: 30_000 })),
    mode: Type.Optional(WaitMode),
    include_terminal: Type.Optional(
      Type.Boolean({
        description:
          'any-mode: a job that is already terminal when the request arrives also ends the wait (at once). ' +
          'Default false: wait for one of the jobs still active when the wait began.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type WaitManyRequest = Static<typeof WaitManyRequest>;

export const WaitManyResponse = Type.Object({
  mode: WaitMode,
  /** true when the wait condition was met, false when the timeout passed first */
  done: Type.Boolean(),
  jobs: Type.Array(Job),
  not_found: Type.Array(Type.String()),
  omitted: Type.Array(JobId, {
    description:
      'known jobs whose snapshots did not fit in this answer (MAX_ANSWER_BYTES of prompts, results and errors): read them with GET /jobs/{job_id}; `done` counts them',
  }),
});
export type WaitManyResponse = Static<typeof WaitManyResponse>;

/** Outcome of a stop request, per job (the usual cancel outcomes, plus `stopping`). */
export const StopOutcome = Type.Union([
  Type.Literal('stopped'),
  Type.Literal('stopping'),
  Type.Literal('already_completed'),
]);
export type StopOutcome = Static<typeof StopOutcome>;

/** Set on the answer to a stop sent again with its Idempotency-Key: the first stop's answer. */
export const Replayed = Type.Optional(
  Type.Literal(true, {
    description:
      'this stop was sent before with the same Idempotency-Key: this is the first answer again (outcomes as it answered them, statuses as they are now), and nothing more was stopped',
  }),
);

export const StopJobResponse = Type.Object({
  job_id: JobId,
  outcome: StopOutcome,
  status: JobStatus,
  job: Job,
  replayed: Replayed,
  job_truncated: Type.Optional(
    Type.Literal(true, {
      description:
        "a replay after history retention deleted the job: `job` is the copy the Idempotency-Key kept, whose prompt, result and error were cut to their first 512 characters (callback_of, message_ids to their first 32 ids)",
    }),
  ),
});
export type StopJobResponse = Static<typeof StopJobResponse>;

export const OutputQuery = Type.Object(
  {
    tail_bytes: Type.Optional(Type.Integer({ minimum: 0, maximum: 16 * 1024 * 1024 })),
    offset: Type.Optional(
      Type.Integer({ minimum: 0, maximum: MAX_OUTPUT_OFFSET, description: 'return output from this byte offset on' }),
    ),
    limit_bytes: Type.Optional(Type.Integer({ minimum: 1, maximum: 16 * 1024 * 1024 })),
    wait_ms: Type.Optional(
      Type.Integer({ minimum: 0, maximum: 300_000, description: 'with offset: wait this long for new output' }),
    ),
  },
  { additionalProperties: false },
);
export type OutputQuery = Static<typeof OutputQuery>;

export const JobOutput = Type.Object({
  job_id: JobId,
  status: JobStatus,
  terminal: Type.Boolean(),
  /** the returned text (a byte range of the job's output, cut on a UTF-8 character boundary) */
  output: Type.String(),
  /** byte offset of `output` in the job's whole output stream */
  offset: Type.Integer(),
  /** byte offset just after `output`: pass it as `offset` to read on */
  next_offset: Type.Integer(),
  /** every byte ever received for the job */
  total_bytes: Type.Integer(),
  /** bytes the coordinator still holds (the newest ones) */
  retained_bytes: Type.Integer(),
  /** true when older output was dropped to respect the per-job cap */
  truncated: Type.Boolean(),
});
export type JobOutput = Static<typeof JobOutput>;

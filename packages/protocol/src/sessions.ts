import { Type, type Static } from '@sinclair/typebox';
import { BoolString, CostUsd, IdParam, JobId, Labels, Nullable, Timestamp, Usage } from './common.js';
import { JobStatus, ListOrder, Replayed, StopOutcome } from './jobs.js';

/** How deep a parent chain may go: a root session is depth 0. */
export const MAX_SESSION_DEPTH = 5;

/**
 * How many entries of `job_ids` and of `children` a session object carries at most, by default
 * (the coordinator's MAX_SESSION_LIST_ITEMS): the newest ones, oldest first. The whole lists are
 * paged by `GET /jobs?session_name=` and `GET /sessions?parent=`.
 */
export const MAX_SESSION_LIST_ITEMS = 1000;

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

/** A message to a session: delivered as (part of) its next turn. */
export const SessionMessage = Type.Object({
  message_id: Type.String({ description: '`msg_` + 12 hex chars' }),
  text: Type.String(),
  created_at: Timestamp,
  created_by: Nullable(Type.String()),
});
export type SessionMessage = Static<typeof SessionMessage>;

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
  /** creation order, as the lists page by it (see ListOrder) */
  seq: Type.Optional(ListOrder),
  /** its jobs, oldest first: the newest MAX_SESSION_LIST_ITEMS of them (all: `GET /jobs?session_name=`, paged) */
  job_ids: Type.Array(JobId),
  /** how many jobs the session has in all (`job_ids` may hold fewer) */
  job_ids_count: Type.Integer({ minimum: 0 }),
  /** true when `job_ids` lists fewer than `job_ids_count`: the oldest were left out */
  job_ids_truncated: Type.Boolean(),
  /** its child sessions, oldest first: the newest MAX_SESSION_LIST_ITEMS of them (all: `GET /sessions?parent=`, paged) */
  children: Type.Array(Type.String()),
  /** how many child sessions it has in all (`children` may hold fewer) */
  children_count: Type.Integer({ minimum: 0 }),
  /** true when `children` lists fewer than `children_count`: the oldest were left out */
  children_truncated: Type.Boolean(),
  /** notifications waiting for the parent to become idle */
  pending_callbacks: Type.Array(CallbackNotification),
  /** the callback resume job currently delivering notifications, if any */
  callback_job_id: Nullable(JobId),
  /** where the session lives: later jobs go only to a launcher on this host serving this directory */
  affinity: Nullable(
    Type.Object({ host_id: Type.String(), working_dir: Nullable(Type.String()), executor_type: Nullable(Type.String()) }),
  ),
  /** messages waiting to be delivered with the session's next turn */
  pending_messages: Type.Array(SessionMessage),
  /** false once the session can no longer take input (see docs/sessions.md) */
  accepts_input: Type.Boolean(),
  created_by: Nullable(Type.String()),
  usage: Usage,
  cost_usd: CostUsd,
  /** this session and all its descendants */
  tree_usage: Usage,
  tree_cost_usd: CostUsd,
  /** the tree budget (set on a root session), null = none */
  budget_usd: Nullable(CostUsd),
  /** the labels its start job required: its later jobs require them too, unless they say otherwise */
  requires: Nullable(Labels),
});
export type Session = Static<typeof Session>;

export const ListSessionsQuery = Type.Object(
  {
    status: Type.Optional(SessionStatus),
    parent: Type.Optional(Type.String({ description: 'only children of this session' })),
    // true: only sessions without a parent (the roots of the trees), paged as the rest; not with parent
    root: Type.Optional(BoolString),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
    cursor: Type.Optional(Type.String({ maxLength: 200, description: 'next_cursor of the previous page' })),
  },
  { additionalProperties: false },
);
export type ListSessionsQuery = Static<typeof ListSessionsQuery>;

export const SessionList = Type.Object({ sessions: Type.Array(Session), next_cursor: Nullable(Type.String()) });
export type SessionList = Static<typeof SessionList>;

export const SessionNameParams = Type.Object({ session_name: IdParam });

export const StopSessionQuery = Type.Object(
  {
    tree: Type.Optional(
      Type.Union([Type.Literal('true'), Type.Literal('false')], {
        description:
          'true: stop the session and every session under it (children, their children, ...), and hold what their ' +
          'children report so that none of them is resumed by it: the whole tree stays stopped until given new input',
      }),
    ),
  },
  { additionalProperties: false },
);
export type StopSessionQuery = Static<typeof StopSessionQuery>;

export const StopSessionResponse = Type.Object({
  session_name: Type.String(),
  stopped: Type.Array(
    Type.Object({
      job_id: JobId,
      outcome: StopOutcome,
      status: JobStatus,
      /** the job's session: the one named, or (tree=true) one under it */
      session_name: Type.String(),
    }),
  ),
  replayed: Replayed,
});
export type StopSessionResponse = Static<typeof StopSessionResponse>;


export const SendMessageRequest = Type.Object(
  { text: Type.String({ minLength: 1, description: 'at most MAX_PROMPT_BYTES bytes' }) },
  { additionalProperties: false },
);
export type SendMessageRequest = Static<typeof SendMessageRequest>;

export const SendMessageResponse = Type.Object({
  session_name: Type.String(),
  /** always `queued` on 200; `not_found` is a 404 and `terminal` a 409 (session_closed) */
  outcome: Type.Literal('queued'),
  message_id: Type.String(),
  /** the resume job that delivers it, when one was created now (the session was idle) */
  job_id: Nullable(JobId),
});
export type SendMessageResponse = Static<typeof SendMessageResponse>;

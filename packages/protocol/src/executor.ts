import { Type, type Static } from '@sinclair/typebox';
import { CostUsd, Nullable, Usage } from './common.js';

/**
 * The executor contract: the launcher runs an executor program once per job, writes one
 * ExecutorInvocation as JSON to its stdin, and reads ExecutorEvent JSON lines from its stdout.
 * Exit code 0 = success. Non-JSON stdout lines count as `output`.
 */
export const EXECUTOR_SCHEMA_VERSION = 1;

export const ExecutorInvocation = Type.Object({
  schema_version: Type.Literal(EXECUTOR_SCHEMA_VERSION),
  mode: Type.Union([Type.Literal('start'), Type.Literal('resume')]),
  job_id: Type.String(),
  session_name: Type.String(),
  prompt: Type.String(),
  agent_name: Nullable(Type.String()),
  project_dir: Nullable(Type.String()),
  parent_session_name: Nullable(Type.String()),
  /** the executor's own id of the session to resume (from an earlier `session` event) */
  executor_session_id: Nullable(Type.String()),
  /** the job's spending cap in US dollars, for executors that can enforce one (claude: --max-budget-usd) */
  max_cost_usd: Type.Optional(Nullable(CostUsd)),
});
export type ExecutorInvocation = Static<typeof ExecutorInvocation>;

/**
 * The longest event line (in bytes, without its newline) a launcher reads: a `result` carries the
 * agent's whole answer. A longer one is not read, and the job fails with
 * `executor_event_too_large`.
 */
export const MAX_EVENT_LINE_BYTES = 16 * 1024 * 1024;

export const ExecutorEvent = Type.Union([
  Type.Object({ type: Type.Literal('output'), text: Type.String() }),
  Type.Object({ type: Type.Literal('session'), session_id: Type.String({ minLength: 1 }) }),
  Type.Object({
    type: Type.Literal('result'),
    text: Type.String(),
    usage: Type.Optional(Usage),
    cost_usd: Type.Optional(CostUsd),
    num_turns: Type.Optional(Type.Integer({ minimum: 0 })),
    duration_api_ms: Type.Optional(Type.Integer({ minimum: 0 })),
  }),
  Type.Object({
    type: Type.Literal('error'),
    message: Type.String(),
    /** a machine-readable code the job fails with (e.g. `session_not_on_host`) */
    code: Type.Optional(Type.String({ pattern: '^[a-z][a-z0-9_]{0,63}$' })),
  }),
]);
export type ExecutorEvent = Static<typeof ExecutorEvent>;

import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Nullable, Role } from './common.js';
import { LifecycleEvent, StreamGap } from './events.js';
import { Job, JobList, JobOutput, JobStatus, WaitMode } from './jobs.js';
import { DeleteLauncherResponse, Health, LauncherList } from './launchers.js';
import { SendMessageResponse, Session, SessionList, StopSessionResponse } from './sessions.js';

/*
 * The `agentq` CLI's machine interface: what `--json` prints and what the process exits with.
 *
 * Every command prints exactly one envelope on stdout. `ok` says whether the command itself
 * worked (the coordinator answered, the job exists); how a job ended is in `data` and in the exit
 * code. `agentq status` of a failed job is `ok: true` with `status: "failed"`, exit 4.
 */

/** Process exit codes. Job outcomes first (0, 3-7), then the command's own failures (1, 2, 5). */
export const CliExitCodes = {
  /** the job completed (terminal, success), or the command worked */
  ok: 0,
  /** the coordinator is unreachable, or an internal error */
  internal_error: 1,
  /** bad arguments, or the coordinator rejected the request (validation, session conflicts) */
  usage_error: 2,
  /** the job is still running (not terminal): poll or wait again */
  running: 3,
  /** the job failed or was interrupted (terminal) */
  failed: 4,
  /** no such job (never existed, or evicted after retention) */
  not_found: 5,
  /** the job was stopped / cancelled (terminal) */
  stopped: 6,
  /** the job ran out of its timeout_ms (terminal) */
  timed_out: 7,
} as const;
export type CliExitCode = (typeof CliExitCodes)[keyof typeof CliExitCodes];

/** The exit code a job's status maps to: the contract of `status`, `wait` and `start --wait`. */
export const JOB_STATUS_EXIT_CODES: { readonly [S in JobStatus]: CliExitCode } = {
  pending: CliExitCodes.running,
  claimed: CliExitCodes.running,
  running: CliExitCodes.running,
  stopping: CliExitCodes.running,
  completed: CliExitCodes.ok,
  failed: CliExitCodes.failed,
  interrupted: CliExitCodes.failed,
  stopped: CliExitCodes.stopped,
  timed_out: CliExitCodes.timed_out,
};
/**
 * The exit code of a job in `status`, given whether the job is `terminal` (its own field). A
 * status this version does not know (one a newer coordinator added: statuses are extended, never
 * renamed) is 3 while the job is not terminal and 4 once it is: it did not complete, so never 0,
 * and a `status` loop that waits for "not 3" ends. Looked up as an own key, so that no status
 * (`toString`, `constructor`) reaches the prototype.
 */
export function exitCodeForStatus(status: JobStatus, terminal?: boolean): CliExitCode {
  if (Object.hasOwn(JOB_STATUS_EXIT_CODES, status)) return JOB_STATUS_EXIT_CODES[status];
  return terminal === true ? CliExitCodes.failed : CliExitCodes.running;
}

/**
 * The async-job descriptor: the job as the coordinator holds it (so `job_id`,
 * `status`, `terminal`, `timeout_ms`, `created_at`, `started_at`, `result`, ...) plus how to
 * follow it up. `timeout_ms` is null when the job has no timeout.
 */
export const JobDescriptor = Type.Composite(
  [
    Job,
    Type.Object({
      /** `agentq status <job_id>`: exits 0 completed, 3 running, 4 failed, 6 stopped, 7 timed out */
      status_command: Type.String(),
      /** `agentq wait <job_id>`: blocks until terminal, then exits like status */
      wait_command: Type.String(),
      /** `agentq cancel <job_id>` */
      cancel_command: Type.String(),
      /** `agentq output <job_id>`: a bounded preview of the job's output */
      output_command: Type.String(),
      /** how often to run status_command when polling (wait_command needs no polling) */
      poll_interval_ms: Type.Integer(),
      /** what status_command exits with for this snapshot */
      exit_code: Type.Integer(),
    }),
  ],
  { description: 'A job plus the commands to follow it up' },
);
export type JobDescriptor = Static<typeof JobDescriptor>;

export const CliError = Type.Object({
  /** machine-readable: `usage_error`, `coordinator_unreachable`, `job_not_found`, `session_exists`, ... */
  code: Type.String(),
  message: Type.String(),
  details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  /**
   * `start --wait` / `resume --wait` whose job was created, then whose wait failed (coordinator
   * unreachable, a refusal for now, ...): the job as last seen. It exists and goes on; follow it
   * with its `wait_command` rather than running the command again (which would add another job).
   */
  job: Type.Optional(JobDescriptor),
});
export type CliError = Static<typeof CliError>;

export const CliFailure = Type.Object({ ok: Type.Literal(false), error: CliError });
export type CliFailure = Static<typeof CliFailure>;

export const CliSuccess = <T extends TSchema>(data: T) => Type.Object({ ok: Type.Literal(true), data });

/** `{ ok: true, data } | { ok: false, error: { code, message } }` */
export const CliEnvelope = <T extends TSchema>(data: T) => Type.Union([CliSuccess(data), CliFailure]);
export type CliEnvelope<T> = { ok: true; data: T } | CliFailure;

/** Per-id outcome of `agentq cancel` (`cancelled`, `already_completed`, `not_found`, plus `stopping`). */
export const CancelOutcomes = ['cancelled', 'stopping', 'already_completed', 'not_found'] as const;
export const CancelOutcome = Type.Union(CancelOutcomes.map((o) => Type.Literal(o)));
export type CancelOutcome = (typeof CancelOutcomes)[number];

export const CancelResult = Type.Object({
  job_id: Type.String(),
  /**
   * cancelled: stopped now (it was pending) · stopping: the launcher was told to stop it ·
   * already_completed: it was already terminal · not_found: no such job
   */
  outcome: CancelOutcome,
  /** the job's status after the request; null when not found */
  status: Nullable(JobStatus),
});
export type CancelResult = Static<typeof CancelResult>;

export const CancelResults = Type.Object({ results: Type.Array(CancelResult) });
export type CancelResults = Static<typeof CancelResults>;

/** `agentq wait`: snapshots of every watched job once the wait ended. */
export const CliWaitResult = Type.Object({
  mode: WaitMode,
  /** true when the condition was met (any: one job terminal; all: every job terminal) */
  done: Type.Boolean(),
  /** the process exit code (see docs/cli.md) */
  exit_code: Type.Integer(),
  jobs: Type.Array(JobDescriptor),
  /** ids that are not known to the coordinator; ignored by the wait */
  not_found: Type.Array(Type.String()),
});
export type CliWaitResult = Static<typeof CliWaitResult>;

export const CliHelp = Type.Object({ help: Type.String() });
export type CliHelp = Static<typeof CliHelp>;

/**
 * `agentq sessions <name>`: a session, its jobs (oldest first; callback resumes have
 * `callback_of`) and, nested, its child sessions.
 */
export const CliSessionTree = Type.Recursive(
  (Node) =>
    Type.Object({
      session: Session,
      jobs: Type.Array(Job),
      /** the session has more jobs than `jobs` lists (only the newest are fetched) */
      more_jobs: Type.Boolean(),
      children: Type.Array(Node),
    }),
  { $id: 'CliSessionTree' },
);
export type CliSessionTree = Static<typeof CliSessionTree>;

/** `agentq token create`: the secret (shown once) and the line for the coordinator's token file. */
export const CliTokenCreated = Type.Object({
  name: Type.String(),
  role: Role,
  /** the bearer token; only its SHA-256 is stored by the coordinator */
  token: Type.String(),
  /** `NAME ROLE SHA256HEX`: append it to AUTH_TOKENS_FILE */
  line: Type.String(),
});
export type CliTokenCreated = Static<typeof CliTokenCreated>;

/** `agentq completion <shell>`: the script to source. */
export const CliCompletion = Type.Object({ shell: Type.String(), script: Type.String() });
export type CliCompletion = Static<typeof CliCompletion>;

/**
 * `agentq output`: the job's output as `GET /jobs/{id}/output` answers it; with `--follow`, one
 * answer covering everything followed, and `dropped_bytes` when the coordinator dropped bytes of
 * that range (per-job cap) before they were read (`output` holds the rest, joined).
 */
export const CliOutput = Type.Composite([
  JobOutput,
  Type.Object({ dropped_bytes: Type.Optional(Type.Integer({ minimum: 1 })) }),
]);
export type CliOutput = Static<typeof CliOutput>;

/** The `data` of each command's success envelope. */
export const CliCommandData = {
  start: JobDescriptor,
  resume: JobDescriptor,
  status: JobDescriptor,
  wait: CliWaitResult,
  cancel: CancelResults,
  list: JobList,
  output: CliOutput,
  launchers: LauncherList,
  sessions: SessionList,
  help: CliHelp,
  /** `sessions <name>` */
  session_tree: CliSessionTree,
  /** `session stop <name>` */
  session_stop: StopSessionResponse,
  /** `launchers rm <id>` */
  launchers_rm: DeleteLauncherResponse,
  health: Health,
  /** `send <session> <text>` */
  send: SendMessageResponse,
  /** `watch --json`: one envelope per line, each with one event */
  watch: Type.Union([LifecycleEvent, StreamGap]),
  /** `token create` */
  token_create: CliTokenCreated,
  completion: CliCompletion,
} as const;
export type CliCommand = keyof typeof CliCommandData;

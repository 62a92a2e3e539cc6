import { EXECUTOR_SCHEMA_VERSION, type ExecutorInvocation, type Job } from '@agentq/protocol';
import { SECRET_ENV } from './config.js';

/**
 * The environment an executor gets: not the launcher's whole environment (which may hold
 * secrets and settings meant for the launcher), but a documented set:
 * - the basics a program needs to run (PATH, HOME, USER, SHELL, LANG, LC_*, TZ, TMPDIR, TERM,
 *   XDG_*, proxy and CA settings),
 * - what agent CLIs read for credentials and settings (ANTHROPIC_*, CLAUDE_*),
 * - the built-in executors' own settings (AGENTQ_CLAUDE_*, AGENTQ_DEMO_*),
 * - the names given with --pass-env,
 * - and the job's AGENTQ_* variables, which always win.
 * Never the launcher's coordinator credentials (its AGENTQ_TOKEN, AGENTQ_TOKEN_FILE), whatever
 * --pass-env says: an executor runs whatever the agent decides, and must not be able to act as the
 * launcher. With authentication on, AGENTQ_TOKEN is instead the job's own agent token, which may
 * only act on the job's session and the sessions below it, and only while the job runs.
 */
const BASE_NAMES = new Set([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'TZ',
  'TMPDIR',
  'TERM',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'NODE_EXTRA_CA_CERTS',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
]);
const PASSED_PREFIXES = ['LC_', 'XDG_', 'ANTHROPIC_', 'CLAUDE_', 'AGENTQ_CLAUDE_', 'AGENTQ_DEMO_'];
const NEVER = new Set<string>(SECRET_ENV);

/** Variables describing the job, set by the launcher for every executor run. */
export interface JobEnv {
  AGENTQ_JOB_ID: string;
  AGENTQ_JOB_TYPE: string;
  AGENTQ_SESSION_NAME: string;
  AGENTQ_PROJECT_DIR: string;
  AGENTQ_COORDINATOR_URL: string;
  /** the same URL under the name the agentq CLI reads */
  AGENTQ_URL?: string;
  /** the launcher's CA file for an https:// coordinator, when it has one */
  AGENTQ_CA_FILE?: string;
  AGENTQ_LAUNCHER_ID: string;
  AGENTQ_EXECUTOR_SCHEMA_VERSION: string;
  AGENTQ_AGENT_NAME?: string;
  AGENTQ_PARENT_SESSION_NAME?: string;
  AGENTQ_EXECUTOR_SESSION_ID?: string;
  /** the per-job agent token (issue 12), when the coordinator minted one; see JobRunnerDeps.agentToken */
  AGENTQ_TOKEN?: string;
  /**
   * the most of the job's output the coordinator keeps (`max_output_bytes`, its
   * JOB_OUTPUT_MAX_BYTES) as it last said it; unset when it did not (OUTPUT_MAX_BYTES_ENV)
   */
  AGENTQ_JOB_OUTPUT_MAX_BYTES?: string;
}

export function buildExecutorEnv(
  source: Record<string, string | undefined>,
  passEnv: readonly string[],
  job: JobEnv,
): Record<string, string> {
  const env: Record<string, string> = {};
  const extra = new Set(passEnv);
  for (const [name, value] of Object.entries(source)) {
    if (value === undefined || NEVER.has(name)) continue;
    if (BASE_NAMES.has(name) || extra.has(name) || PASSED_PREFIXES.some((p) => name.startsWith(p))) env[name] = value;
  }
  for (const [name, value] of Object.entries(job)) if (value !== undefined) env[name] = value;
  return env;
}

/** The job's AGENTQ_* variables: what the job is, and how its agent reaches the coordinator. */
export function jobEnv(
  job: Job,
  cwd: string,
  from: { coordinatorUrl: string; caFile: string | undefined; launcherId: string; token: string | undefined; outputMaxBytes?: number | undefined },
): JobEnv {
  return {
    AGENTQ_JOB_ID: job.job_id,
    AGENTQ_JOB_TYPE: job.type,
    AGENTQ_SESSION_NAME: job.session_name,
    AGENTQ_PROJECT_DIR: cwd,
    AGENTQ_COORDINATOR_URL: from.coordinatorUrl,
    // the names the agentq CLI reads, so that `agentq start` (and `agentq mcp`) run by the agent
    // reach this coordinator, with the job's token
    AGENTQ_URL: from.coordinatorUrl,
    AGENTQ_CA_FILE: from.caFile,
    AGENTQ_LAUNCHER_ID: from.launcherId,
    AGENTQ_EXECUTOR_SCHEMA_VERSION: String(EXECUTOR_SCHEMA_VERSION),
    AGENTQ_AGENT_NAME: job.agent_name ?? undefined,
    AGENTQ_PARENT_SESSION_NAME: job.parent_session_name ?? undefined,
    AGENTQ_EXECUTOR_SESSION_ID: job.executor_session_id ?? undefined,
    AGENTQ_TOKEN: from.token,
    AGENTQ_JOB_OUTPUT_MAX_BYTES: from.outputMaxBytes === undefined ? undefined : String(from.outputMaxBytes),
  };
}

/** What the executor reads on its stdin: the job, run in `cwd` (the job's directory as resolved). */
export function invocationOf(job: Job, cwd: string): ExecutorInvocation {
  return {
    schema_version: EXECUTOR_SCHEMA_VERSION,
    mode: job.type === 'resume_session' ? 'resume' : 'start',
    job_id: job.job_id,
    session_name: job.session_name,
    prompt: job.prompt,
    agent_name: job.agent_name,
    project_dir: cwd,
    parent_session_name: job.parent_session_name,
    executor_session_id: job.executor_session_id,
    max_cost_usd: job.max_cost_usd ?? null,
  };
}

import type { ErrorCode, FailedReport } from '@agentq/protocol';
import type { AgentqApiError } from '@agentq/client';
import { bodyRefused } from './sync-channel.js';
import type { ExecutorExit } from './executor-process.js';
import { describeExitCode, describeSignal } from './exit-status.js';
import { boundError, storable } from './report-bounds.js';
import type { Report } from './reporter.js';

/*
 * What a job's final report says when the run failed (the launcher's own error codes, the error
 * of an executor's exit), or when the report the launcher sent was refused: apart from the run
 * (JobRunner) that decides which report it is.
 */

/** Job error codes the launcher itself sets on a failed report (executors may send their own). */
export const LAUNCHER_ERROR_CODES = {
  outside_project_roots: "the job's project_dir is not inside any of this launcher's project roots",
  project_dir_not_found: "the job's project_dir does not exist on this host",
  executor_idle: 'the executor printed nothing for --idle-timeout seconds and was stopped',
  launcher_shutdown: 'the launcher shut down and killed the executor once --shutdown-grace was over',
  launcher_deregistered: 'the launcher was deregistered and, run with --stop-on-exit, killed the executor',
} as const;

/** The codes of a launcher's own interruption of its jobs. */
export type InterruptionCode = 'launcher_shutdown' | 'launcher_deregistered';

/**
 * The error of a failed run. A signal, or an exit code that names one (143: 128 + SIGTERM), comes
 * with what usually sends it, unless the launcher had sent SIGTERM itself (`stoppedByLauncher`:
 * its exit grace ran out, or a stop or its shutdown came, after the executor's answer, which is
 * then the job's error): that is what the exit code says, and "by a user, a service manager or
 * a shutdown" would blame someone else.
 */
export function failureMessage(exit: ExecutorExit, errorMessage: string | undefined, stoppedByLauncher: boolean): { text: string; cutBytes: number } {
  if (errorMessage !== undefined) {
    // an executor's message too long for a report is cut here, before its exit code, which the
    // cut keeps (the reporter's own cut would take it with the end of the message); NULs first
    // become U+FFFD (3 bytes), as the reporter makes them, so that its cut finds nothing to do
    const message = storable(errorMessage);
    if (exit.code === null || exit.code === 0) return boundError(message);
    return boundError(message, ` (exit code ${stoppedByLauncher ? `${exit.code}, after the launcher's SIGTERM` : describeExitCode(exit.code)})`);
  }
  const how = exit.signal ? `executor killed by ${describeSignal(exit.signal)}` : `executor exited with code ${exit.code === null ? 'unknown' : describeExitCode(exit.code)}`;
  return { text: exit.stderrTail ? `${how}; stderr:\n${exit.stderrTail}` : `${how}; no stderr`, cutBytes: 0 };
}

/**
 * Whether a refusal of `started` says its body was refused (400, 413), so that the job is ended
 * `failed` rather than left to go back to the queue: the coordinator's own refusals of a body
 * (`validation_failed`, `bad_request`, `payload_too_large`) or a proxy's 400 or 413 (`http_400`,
 * `http_413`). Not any other code with those statuses: a per-report result of a sync whose code
 * this launcher does not know (a newer coordinator's) is given status 400 (sync-channel.ts
 * resultError), and would fail a job the coordinator may have taken back for a reason of its own,
 * which another launcher, or a later claim, can run.
 */
export function refusedForItsBody(err: AgentqApiError): boolean {
  if (!bodyRefused(err)) return false;
  return BODY_REFUSALS.has(err.code) || err.code === `http_${err.status}`;
}

const BODY_REFUSALS: ReadonlySet<string> = new Set(['validation_failed', 'bad_request', 'payload_too_large'] satisfies ErrorCode[]);

/**
 * The report that ends a job whose final report (or whose `started`: it was not run) was refused
 * for its body (400, 413): `failed`
 * with `report_refused`, what the refused one knew of the session and its cost, and an error
 * that says why and where what is left of its answer is. (A result over the coordinator's limit
 * is cut to fit before it is sent; one refused all the same, by a proxy with a smaller body limit
 * or a coordinator that did not say its limit, is lost, but what the executor printed is in the
 * output.)
 */
export function refusedInstead(jobId: string, report: Report, code: string, message: string): Report {
  const b = report.body as Partial<FailedReport>;
  return {
    kind: 'failed',
    body: definedOnly({
      error: refusalMessage(jobId, report, code, message),
      error_code: 'report_refused',
      executor_session_id: b.executor_session_id,
      usage: b.usage,
      cost_usd: b.cost_usd,
      num_turns: b.num_turns,
      duration_api_ms: b.duration_api_ms,
    }) as Omit<FailedReport, 'launcher_id'>,
  };
}

function refusalMessage(jobId: string, report: Report, code: string, message: string): string {
  const result = report.kind === 'completed' ? report.body.result : undefined;
  const lost = typeof result === 'string' ? `; its result (${Buffer.byteLength(result)} bytes) could not be kept` : '';
  const refused = `the coordinator refused the job's ${report.kind} report (${code}): ${message.slice(0, 2000)}${lost}. `;
  // `started` comes before the executor: refused, it never ran, and there is no output to read
  if (report.kind === 'started') return `${refused}The job was not run`;
  return refused + `What the executor printed is in the job's output: GET /jobs/${jobId}/output (\`agentq output ${jobId}\`)`;
}

/** The object without its undefined properties (optional wire fields are left out, not null). */
export function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

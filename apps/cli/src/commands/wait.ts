import {
  CliExitCodes,
  exitCodeForStatus,
  type CliExitCode,
  type CliWaitResult,
  type Job,
  type WaitMode,
} from '@agentq/protocol';
import { boolOpt, durationOpt, expectPositionals, type OptionSpec, type ParsedArgs } from '../args.js';
import type { CommandContext, CommandResult } from '../context.js';
import { describeJob } from '../descriptor.js';
import { formatDuration } from '../duration.js';
import { jobNotFound } from '../errors.js';
import { Progress } from '../progress.js';
import { renderDescriptor, renderJobTable } from '../render.js';
import { waitForJobs } from '../waiting.js';

export const waitOptions = {
  all: { type: 'boolean' },
  timeout: { type: 'string' },
} as const satisfies OptionSpec;

/**
 * `agentq wait <job...> [--all] [--timeout]`: block until the first job (default, like seed 000)
 * or every job (`--all`) is terminal, or the timeout passes. Unknown ids are reported and ignored.
 */
export async function wait(ctx: CommandContext, args: ParsedArgs): Promise<CommandResult> {
  const ids = expectPositionals(args, 'wait', '<job_id>', 1, Infinity);
  const mode: WaitMode = boolOpt(args, 'all') ? 'all' : 'any';
  const timeoutMs = durationOpt(args, 'timeout', 'wait');
  const startedAt = ctx.now();

  const progress = Progress.start(ctx.io, ctx.client, ctx.now, []);
  let outcome;
  try {
    outcome = await waitForJobs(ctx.client, ids, mode, {
      timeoutMs,
      signal: ctx.signal,
      now: ctx.now,
      onSnapshot: (jobs) => progress?.update(jobs),
    });
  } finally {
    progress?.stop();
  }
  if (outcome.jobs.length === 0) throw jobNotFound(outcome.notFound);

  const exitCode = waitExitCode(outcome.done, outcome.jobs);
  const data: CliWaitResult = {
    mode,
    done: outcome.done,
    exit_code: exitCode,
    jobs: outcome.jobs.map((j) => describeJob(j, ctx)),
    not_found: outcome.notFound,
  };
  const elapsed = formatDuration(ctx.now() - startedAt);
  return { data, exitCode, text: () => renderWait(data, elapsed, ctx.now()) };
}

/**
 * The exit code of a wait:
 * - 3 when the wait ended before its condition (timeout, Ctrl-C): jobs are still running;
 * - otherwise 0 when every terminal job completed, else the code of the first terminal job,
 *   in the order the ids were given, that did not complete (4, 6 or 7).
 * Jobs still running after an `any` wait do not count: they are reported, not judged.
 */
export function waitExitCode(done: boolean, jobs: readonly Job[]): CliExitCode {
  if (!done) return CliExitCodes.running;
  for (const job of jobs) {
    if (!job.terminal) continue;
    const code = exitCodeForStatus(job.status);
    if (code !== CliExitCodes.ok) return code;
  }
  return CliExitCodes.ok;
}

function renderWait(data: CliWaitResult, elapsed: string, now: number): string {
  const running = data.jobs.filter((j) => !j.terminal);
  const lines: string[] = [];
  if (!data.done) lines.push(`stopped waiting after ${elapsed}: ${running.length} job(s) still running`);
  if (data.jobs.length === 1 && data.not_found.length === 0) {
    lines.push(renderDescriptor(data.jobs[0] as CliWaitResult['jobs'][number], now));
  } else {
    if (data.done) {
      const finished = data.jobs.length - running.length;
      lines.push(`${finished} of ${data.jobs.length} job(s) finished after ${elapsed}`);
    }
    lines.push(renderJobTable(data.jobs, now));
    if (data.not_found.length > 0) lines.push(`not found: ${data.not_found.join(' ')}`);
    if (running.length > 0) {
      lines.push(`still running: agentq wait ${running.map((j) => j.job_id).join(' ')}`);
    }
  }
  return lines.join('\n');
}

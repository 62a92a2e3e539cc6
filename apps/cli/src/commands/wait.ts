import {
  CliExitCodes,
  exitCodeForStatus,
  type CliExitCode,
  type CliWaitResult,
  type Job,
  type WaitMode,
} from '@agentq/protocol';
import { Option, type Command } from 'commander';
import { namesArg, timeoutArg, timeoutMs, type Timeout } from '../args.js';
import type { CommandContext, CommandResult } from '../context.js';
import { describeJob } from '../descriptor.js';
import { formatDuration } from '../duration.js';
import { jobNotFound } from '../errors.js';
import { commandHelpAfter } from '../help.js';
import type { Act } from '../program.js';
import { Progress } from '../progress.js';
import { renderDescriptor, renderJobTable, seedJob } from '../render.js';
import { printableLine as line } from '../table.js';
import { waitForJobs } from '../waiting.js';

interface WaitOptions {
  all?: boolean;
  timeout?: Timeout;
}

const NOTES = `Exit: 3 if the wait stopped before its condition; otherwise 0 if every finished job
completed, else the code of the first finished job (in argument order) that did not.
Unknown ids are listed in not_found and ignored; 5 if none of the ids exists.
A coordinator restart does not end the wait; 1 if no coordinator answers until the
timeout (or for 5 minutes).`;

export function registerWait(program: Command, act: Act): void {
  program
    .command('wait')
    .summary('block until the first (or --all) of the jobs is terminal')
    .usage('<job_id...> [--all] [--timeout <duration>]')
    .argument('<job_id...>', 'the jobs', namesArg('a job id (job_…)'))
    .option('--all', 'wait for every job (default: return when the first one ends)')
    .addOption(
      new Option('--timeout <duration>', 'stop waiting after this long (default and none: no limit); exit 3').argParser(
        timeoutArg(),
      ),
    )
    .addHelpText('after', commandHelpAfter(NOTES))
    .action(act(wait));
}

/**
 * `agentq wait <job...> [--all] [--timeout]`: block until the first job (default) or every job
 * (`--all`) is terminal, or the timeout passes. Unknown ids are reported and ignored.
 */
async function wait(ctx: CommandContext, cmd: Command): Promise<CommandResult> {
  const [ids] = cmd.processedArgs as [string[]];
  const o = cmd.opts<WaitOptions>();
  const mode: WaitMode = o.all ? 'all' : 'any';
  const startedAt = ctx.now();

  const progress = Progress.start(ctx.io, ctx.client, ctx.now);
  let outcome;
  try {
    await progress?.ready;
    let first = true;
    outcome = await waitForJobs(ctx.client, ids, mode, {
      timeoutMs: timeoutMs(o.timeout) ?? undefined,
      signal: ctx.signal,
      now: ctx.now,
      onSnapshot: (jobs) => {
        // the first answer is the snapshot the progress starts from; later ones only fill in
        if (first) progress?.track(jobs);
        else progress?.snapshot(jobs);
        first = false;
      },
    });
    if (!ctx.signal?.aborted) await progress?.settle(outcome.jobs.filter((j) => j.terminal));
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
    const code = exitCodeForStatus(job.status, job.terminal);
    if (code !== CliExitCodes.ok) return code;
  }
  return CliExitCodes.ok;
}

function renderWait(data: CliWaitResult, elapsed: string, now: number): string {
  const running = data.jobs.map(seedJob).filter((j) => !j.terminal);
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
    if (data.not_found.length > 0) lines.push(`not found: ${data.not_found.map(line).join(' ')}`);
    if (running.length > 0) {
      lines.push(`still running: agentq wait ${running.map((j) => line(j.job_id)).join(' ')}`);
    }
  }
  return lines.join('\n');
}

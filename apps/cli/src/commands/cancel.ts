import { AgentqApiError } from '@agentq/client';
import {
  CliExitCodes,
  type CancelOutcome,
  type CancelResult,
  type CancelResults,
  type StopOutcome,
} from '@agentq/protocol';
import type { Command } from 'commander';
import { namesArg } from '../args.js';
import type { CommandContext } from '../context.js';
import { commandHelpAfter } from '../help.js';
import { limiter } from '../limiter.js';
import type { Act } from '../program.js';
import { table } from '../render.js';

/** The coordinator's stop outcome, in the CLI's words. */
const CANCEL_OUTCOME: { readonly [O in StopOutcome]: CancelOutcome } = {
  stopped: 'cancelled',
  stopping: 'stopping',
  already_completed: 'already_completed',
};

/**
 * `agentq cancel <job...>`: ask each job to stop and report per id. A pending job is
 * `cancelled` at once; a running one is `stopping` until its launcher has stopped it. Exit 0
 * when every id was known, 5 when any was not (the others are still cancelled).
 */
export function registerCancel(program: Command, act: Act): void {
  program
    .command('cancel')
    .summary('stop jobs; reports cancelled / stopping / already_completed / not_found per id')
    .argument('<job_id...>', 'the jobs', namesArg('a job id (job_…)'))
    .addHelpText('after', commandHelpAfter('Exits 0 when every id was known, 5 when any was not found.'))
    .action(
      act(async (ctx, cmd) => {
        const [ids] = cmd.processedArgs as [string[]];
        const limit = limiter(CANCEL_CONCURRENCY);
        const results = await Promise.all([...new Set(ids)].map((id) => limit(() => cancelOne(ctx, id))));
        const data: CancelResults = { results };
        const exitCode = results.some((r) => r.outcome === 'not_found') ? CliExitCodes.not_found : CliExitCodes.ok;
        return {
          data,
          exitCode,
          text: () =>
            table(
              ['JOB', 'OUTCOME', 'STATUS'],
              results.map((r) => [r.job_id, r.outcome, r.status ?? '-']),
            ),
        };
      }),
    );
}

/**
 * How many stops are in flight at once. One connection each: all at once, a few thousand ids
 * would pass the coordinator's MAX_CONNECTIONS, which cuts the extra connections, and the
 * command would fail half done, without its report.
 */
const CANCEL_CONCURRENCY = 8;

async function cancelOne(ctx: CommandContext, jobId: string): Promise<CancelResult> {
  try {
    const res = await ctx.client.stopJob(jobId, { signal: ctx.signal });
    return { job_id: jobId, outcome: CANCEL_OUTCOME[res.outcome], status: res.status };
  } catch (err) {
    if (err instanceof AgentqApiError && err.code === 'job_not_found') {
      return { job_id: jobId, outcome: 'not_found', status: null };
    }
    throw err;
  }
}

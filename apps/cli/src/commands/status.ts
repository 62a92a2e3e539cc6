import { exitCodeForStatus } from '@agentq/protocol';
import type { Command } from 'commander';
import { nameArg } from '../args.js';
import { describeJob } from '../descriptor.js';
import { commandHelpAfter } from '../help.js';
import type { Act } from '../program.js';
import { renderDescriptor } from '../render.js';

/** `agentq status <job>`: one snapshot; the exit code is the job's state (never 0 unless completed). */
export function registerStatus(program: Command, act: Act): void {
  program
    .command('status')
    .summary("one snapshot of a job; the exit code is the job's state")
    .argument('<job_id>', 'the job', nameArg('a job id (job_…)'))
    .addHelpText(
      'after',
      commandHelpAfter(
        'Exits 0 completed, 3 still running, 4 failed/interrupted, 5 not found, 6 stopped, 7 timed out.',
      ),
    )
    .action(
      act(async (ctx, cmd) => {
        const [jobId] = cmd.processedArgs as [string];
        const job = await ctx.client.getJob(jobId, { signal: ctx.signal });
        const d = describeJob(job, ctx);
        return { data: d, exitCode: exitCodeForStatus(job.status, job.terminal), text: () => renderDescriptor(d, ctx.now()) };
      }),
    );
}

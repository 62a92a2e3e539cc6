import { exitCodeForStatus } from '@agentq/protocol';
import { expectPositionals, type ParsedArgs } from '../args.js';
import type { CommandContext, CommandResult } from '../context.js';
import { describeJob } from '../descriptor.js';
import { renderDescriptor } from '../render.js';

/** `agentq status <job>`: one snapshot; the exit code is the job's state (never 0 unless completed). */
export async function status(ctx: CommandContext, args: ParsedArgs): Promise<CommandResult> {
  const [jobId] = expectPositionals(args, 'status', '<job_id>', 1, 1);
  const job = await ctx.client.getJob(jobId as string, { signal: ctx.signal });
  const d = describeJob(job, ctx);
  return { data: d, exitCode: exitCodeForStatus(job.status), text: () => renderDescriptor(d, ctx.now()) };
}

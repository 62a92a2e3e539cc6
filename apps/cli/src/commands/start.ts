import { exitCodeForStatus, type CreateJobRequest, type JobType } from '@agentq/protocol';
import { boolOpt, durationOpt, expectPositionals, stringOpt, type OptionSpec, type ParsedArgs } from '../args.js';
import type { CommandContext, CommandResult } from '../context.js';
import { describeJob } from '../descriptor.js';
import { UsageError } from '../errors.js';
import { Progress } from '../progress.js';
import { renderDescriptor } from '../render.js';
import { waitForJob } from '../waiting.js';

export const startOptions = {
  prompt: { type: 'string', short: 'p' },
  agent: { type: 'string' },
  'project-dir': { type: 'string' },
  parent: { type: 'string' },
  timeout: { type: 'string' },
  wait: { type: 'boolean' },
  'wait-timeout': { type: 'string' },
} as const satisfies OptionSpec;

/**
 * `agentq start` / `agentq resume`: create the job and print its descriptor at once (exit 0:
 * accepted), or with `--wait` block until it is terminal and exit with its outcome.
 */
export async function createJob(type: JobType, ctx: CommandContext, args: ParsedArgs): Promise<CommandResult> {
  const command = type === 'start_session' ? 'start' : 'resume';
  const [session] = expectPositionals(args, command, '<session>', 1, 1);
  const prompt = stringOpt(args, 'prompt');
  if (prompt === undefined || prompt === '') throw new UsageError('missing -p <prompt>', command);
  const timeoutMs = durationOpt(args, 'timeout', command, 1);
  const waitTimeoutMs = durationOpt(args, 'wait-timeout', command);
  const wait = boolOpt(args, 'wait') || waitTimeoutMs !== undefined;

  const body: CreateJobRequest = { type, session_name: session as string, prompt };
  const agent = stringOpt(args, 'agent');
  const projectDir = stringOpt(args, 'project-dir');
  const parent = stringOpt(args, 'parent');
  if (agent !== undefined) body.agent_name = agent;
  if (projectDir !== undefined) body.project_dir = projectDir;
  if (parent !== undefined) body.parent_session_name = parent;
  if (timeoutMs !== undefined) body.timeout_ms = timeoutMs;

  const created = await ctx.client.createJob(body, { signal: ctx.signal });
  if (!wait) {
    const d = describeJob(created, ctx);
    // exit 0: the job was accepted. Its own state is in the descriptor (terminal: false).
    return { data: d, exitCode: 0, text: () => renderDescriptor(d, ctx.now(), `${command === 'start' ? 'started' : 'resumed'} ${d.session_name}: job ${d.job_id}`) };
  }

  const progress = Progress.start(ctx.io, ctx.client, ctx.now, [created]);
  let job;
  try {
    job = await waitForJob(ctx.client, created.job_id, created, {
      timeoutMs: waitTimeoutMs,
      signal: ctx.signal,
      now: ctx.now,
      onSnapshot: (jobs) => progress?.update(jobs),
    });
    progress?.update([job]);
  } finally {
    progress?.stop();
  }
  const d = describeJob(job, ctx);
  return { data: d, exitCode: exitCodeForStatus(job.status), text: () => renderDescriptor(d, ctx.now()) };
}

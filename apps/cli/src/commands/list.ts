import type { ListJobsQuery } from '@agentq/protocol';
import { boolOpt, expectPositionals, intOpt, stringOpt, type OptionSpec, type ParsedArgs } from '../args.js';
import type { CommandContext, CommandResult } from '../context.js';
import { renderJobTable } from '../render.js';

export const listOptions = {
  all: { type: 'boolean', short: 'a' },
  status: { type: 'string' },
  session: { type: 'string' },
  launcher: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
} as const satisfies OptionSpec;

/**
 * `agentq list`: jobs newest first. Like TaskList, only jobs that are not terminal unless
 * `--all` (or an explicit `--status`) asks for the finished ones too.
 */
export async function list(ctx: CommandContext, args: ParsedArgs): Promise<CommandResult> {
  expectPositionals(args, 'list', '', 0, 0);
  const query: ListJobsQuery = {};
  const statuses = stringOpt(args, 'status');
  if (statuses !== undefined) query.status = statuses;
  else if (!boolOpt(args, 'all')) query.terminal = 'false';
  const session = stringOpt(args, 'session');
  const launcher = stringOpt(args, 'launcher');
  const limit = intOpt(args, 'limit', 'list', 1, 1000);
  const cursor = stringOpt(args, 'cursor');
  if (session !== undefined) query.session_name = session;
  if (launcher !== undefined) query.launcher_id = launcher;
  if (limit !== undefined) query.limit = limit;
  if (cursor !== undefined) query.cursor = cursor;

  const data = await ctx.client.listJobs(query, { signal: ctx.signal });
  const text = () => {
    if (data.jobs.length === 0) {
      return query.terminal === 'false' ? 'no active jobs (agentq list --all shows finished ones too)' : 'no jobs';
    }
    const lines = [renderJobTable(data.jobs, ctx.now())];
    if (data.next_cursor) lines.push(`more: run the same command with --cursor ${data.next_cursor}`);
    return lines.join('\n');
  };
  return { data, exitCode: 0, text };
}

import type { ListSessionsQuery } from '@agentq/protocol';
import { expectPositionals, stringOpt, type OptionSpec, type ParsedArgs } from '../args.js';
import type { CommandContext, CommandResult } from '../context.js';
import { UsageError } from '../errors.js';
import { ago, table } from '../render.js';

export const sessionsOptions = {
  status: { type: 'string' },
  parent: { type: 'string' },
} as const satisfies OptionSpec;

/** `agentq sessions`: every session, its state and its last outcome. */
export async function sessions(ctx: CommandContext, args: ParsedArgs): Promise<CommandResult> {
  expectPositionals(args, 'sessions', '', 0, 0);
  const query: ListSessionsQuery = {};
  const status = stringOpt(args, 'status');
  if (status !== undefined) {
    if (status !== 'idle' && status !== 'busy') throw new UsageError(`--status must be idle or busy, not '${status}'`, 'sessions');
    query.status = status;
  }
  const parent = stringOpt(args, 'parent');
  if (parent !== undefined) query.parent = parent;
  const data = await ctx.client.listSessions(query, { signal: ctx.signal });
  const now = ctx.now();
  const text = () =>
    data.sessions.length === 0
      ? 'no sessions'
      : table(
          ['SESSION', 'STATUS', 'AGENT', 'PARENT', 'ACTIVE JOB', 'LAST', 'UPDATED'],
          data.sessions.map((s) => [
            s.session_name,
            s.status,
            s.agent_name ?? '-',
            s.parent_session_name ?? '-',
            s.active_job_id ?? '-',
            s.last_job_status ?? '-',
            ago(s.updated_at, now),
          ]),
        );
  return { data, exitCode: 0, text };
}

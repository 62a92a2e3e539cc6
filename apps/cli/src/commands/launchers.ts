import { expectPositionals, type ParsedArgs } from '../args.js';
import type { CommandContext, CommandResult } from '../context.js';
import { formatDuration } from '../duration.js';
import { table } from '../render.js';

/** `agentq launchers`: the registered launchers and what they hold. */
export async function launchers(ctx: CommandContext, args: ParsedArgs): Promise<CommandResult> {
  expectPositionals(args, 'launchers', '', 0, 0);
  const data = await ctx.client.listLaunchers({ signal: ctx.signal });
  const text = () =>
    data.launchers.length === 0
      ? 'no launchers registered'
      : table(
          ['LAUNCHER', 'STATUS', 'HOST', 'EXECUTOR', 'JOBS', 'HEARTBEAT', 'PROJECT'],
          data.launchers.map((l) => [
            l.launcher_id,
            l.status,
            l.hostname ?? '-',
            l.executor_type ?? '-',
            `${l.active_jobs.length}/${l.max_jobs ?? '-'}`,
            `${formatDuration(l.seconds_since_heartbeat * 1000)} ago`,
            l.project_dir ?? '-',
          ]),
        );
  return { data, exitCode: 0, text };
}

import type { ListSessionsQuery, SessionList } from '@agentq/protocol';
import { Option, type Command } from 'commander';
import { intArg, nameArg } from '../args.js';
import type { CommandContext, CommandResult } from '../context.js';
import { notFoundOn, UsageError } from '../errors.js';
import { commandHelpAfter } from '../help.js';
import type { Act } from '../program.js';
import { ago, dash, formatUsage, hasUsage, table } from '../render.js';
import { fetchSessionTree, renderSessionTree } from '../session-tree.js';
import { printableLine } from '../table.js';

interface SessionsOptions {
  status?: 'idle' | 'busy';
  parent?: string;
  limit?: number;
  cursor?: string;
}

/** `agentq sessions`: every session, or with a name, that session's tree. `agentq session stop`. */
export function registerSessions(program: Command, act: Act): void {
  program
    .command('sessions')
    .summary('sessions, their state and last outcome; with a name: its tree of jobs and children')
    .argument('[session]', "show this session's tree: its jobs (callbacks marked), child sessions, usage", nameArg('a session name'))
    .addOption(new Option('--status <status>', 'only sessions in this state').choices(['idle', 'busy']))
    .addOption(new Option('--parent <session>', 'only children of this session').argParser(nameArg('a session name')))
    .addOption(new Option('--limit <n>', 'page size (1-1000, default 100)').argParser(intArg(1, 1000)))
    .option('--cursor <c>', 'next page (the cursor the previous page printed)')
    .addHelpText('after', commandHelpAfter())
    .action(
      act(async (ctx, cmd) => {
        const [name] = cmd.processedArgs as [string | undefined];
        const o = cmd.opts<SessionsOptions>();
        if (name === undefined) return listSessions(ctx, o);
        if (o.status !== undefined || o.parent !== undefined || o.limit !== undefined || o.cursor !== undefined) {
          throw new UsageError(
            '--status, --parent, --limit and --cursor list sessions: give them without a session name',
          );
        }
        const tree = await notFoundOn('session_not_found', fetchSessionTree(ctx.client, name, ctx.signal));
        return { data: tree, exitCode: 0, text: () => renderSessionTree(tree, ctx.now()) };
      }),
    );

  const session = act.group(program, 'session', 'act on one session');
  session
    .command('stop')
    .summary('stop everything a session is doing (its active job and pending ones)')
    .argument('<session>', 'the session', nameArg('a session name'))
    .option('--tree', 'also stop every session under it (children, theirs, ...); they stay stopped until given new input')
    .addHelpText(
      'after',
      commandHelpAfter(
        'Exits 0 when jobs were stopped, 2 when the session (with --tree: the whole tree) is idle\n(session_idle), 5 when it does not exist.',
      ),
    )
    .action(
      act(async (ctx, cmd) => {
        const [name] = cmd.processedArgs as [string];
        const { tree } = cmd.opts<{ tree?: boolean }>();
        const data = await notFoundOn('session_not_found', ctx.client.stopSession(name, { signal: ctx.signal, ...(tree ? { tree } : {}) }));
        const text = () =>
          tree
            ? table(['SESSION', 'JOB', 'OUTCOME', 'STATUS'], data.stopped.map((s) => [s.session_name, s.job_id, s.outcome, s.status]))
            : table(['JOB', 'OUTCOME', 'STATUS'], data.stopped.map((s) => [s.job_id, s.outcome, s.status]));
        return { data, exitCode: 0, text };
      }),
    );
}

async function listSessions(ctx: CommandContext, o: SessionsOptions): Promise<CommandResult> {
  const query: ListSessionsQuery = {};
  if (o.status !== undefined) query.status = o.status;
  if (o.parent !== undefined) query.parent = o.parent;
  if (o.limit !== undefined) query.limit = o.limit;
  if (o.cursor !== undefined) query.cursor = o.cursor;
  const data = await ctx.client.listSessions(query, { signal: ctx.signal });
  return { data, exitCode: 0, text: () => renderSessions(data, ctx.now()) };
}

/** The sessions table; the USAGE column appears once any session has used something. */
export function renderSessions(data: SessionList, now: number): string {
  if (data.sessions.length === 0) return 'no sessions';
  const withUsage = data.sessions.some((s) => hasUsage(s.usage, s.cost_usd));
  const header = [
    'SESSION',
    'STATUS',
    'AGENT',
    'PARENT',
    'ACTIVE JOB',
    'LAST',
    'UPDATED',
    ...(withUsage ? ['USAGE'] : []),
  ];
  const rows = data.sessions.map((s) => [
    s.session_name,
    s.status,
    dash(s.agent_name),
    dash(s.parent_session_name),
    dash(s.active_job_id),
    dash(s.last_job_status),
    ago(s.updated_at, now),
    ...(withUsage ? [hasUsage(s.usage, s.cost_usd) ? formatUsage(s.usage, s.cost_usd) : '-'] : []),
  ]);
  const lines = [table(header, rows, 60)];
  if (data.next_cursor) lines.push(`more: run the same command with --cursor ${printableLine(data.next_cursor)}`);
  return lines.join('\n');
}

import type { ListJobsQuery } from '@agentq/protocol';
import { Option, type Command } from 'commander';
import { intArg, nameArg } from '../args.js';
import type { Act } from '../program.js';
import { renderJobTable } from '../render.js';
import { printableLine } from '../table.js';

interface ListOptions {
  all?: boolean;
  status?: string;
  session?: string;
  launcher?: string;
  limit?: number;
  cursor?: string;
}

/**
 * `agentq list`: jobs newest first. Only jobs that are not terminal unless `--all` (or an
 * explicit `--status`) asks for the finished ones too. Callback resumes show as `callback`.
 */
export function registerList(program: Command, act: Act): void {
  program
    .command('list')
    .summary('jobs that are not terminal, newest first (--all: every job)')
    .option('-a, --all', 'include terminal jobs')
    .option('--status <s,...>', 'only these statuses (e.g. failed,timed_out); implies --all')
    .addOption(new Option('--session <name>', 'only jobs of this session').argParser(nameArg('a session name')))
    .addOption(new Option('--launcher <id>', 'only jobs of this launcher').argParser(nameArg('a launcher id (lnch_…)')))
    .addOption(new Option('--limit <n>', 'page size (1-1000, default 100)').argParser(intArg(1, 1000)))
    .option('--cursor <c>', 'next page (the cursor the previous page printed)')
    .addHelpText('after', "\nTYPE is start, resume, or callback (a resume that delivers child sessions' outcomes).")
    .action(
      act(async (ctx, cmd) => {
        const o = cmd.opts<ListOptions>();
        const query: ListJobsQuery = {};
        if (o.status !== undefined) query.status = o.status;
        else if (!o.all) query.terminal = 'false';
        if (o.session !== undefined) query.session_name = o.session;
        if (o.launcher !== undefined) query.launcher_id = o.launcher;
        if (o.limit !== undefined) query.limit = o.limit;
        if (o.cursor !== undefined) query.cursor = o.cursor;

        const data = await ctx.client.listJobs(query, { signal: ctx.signal });
        const text = () => {
          if (data.jobs.length === 0) {
            return query.terminal === 'false'
              ? 'no active jobs (agentq list --all shows finished ones too)'
              : 'no jobs';
          }
          const lines = [renderJobTable(data.jobs, ctx.now())];
          if (data.next_cursor) lines.push(`more: run the same command with --cursor ${printableLine(data.next_cursor)}`);
          return lines.join('\n');
        };
        return { data, exitCode: 0, text };
      }),
    );
}

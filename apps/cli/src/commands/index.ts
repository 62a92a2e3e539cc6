import type { OptionSpec, ParsedArgs } from '../args.js';
import type { CommandContext, CommandResult } from '../context.js';
import { cancel } from './cancel.js';
import { launchers } from './launchers.js';
import { list, listOptions } from './list.js';
import { output, outputOptions } from './output.js';
import { sessions, sessionsOptions } from './sessions.js';
import { createJob, startOptions } from './start.js';
import { status } from './status.js';
import { wait, waitOptions } from './wait.js';

export interface CommandSpec {
  summary: string;
  usage: string;
  /** option lines for `--help` (global options are added by help.ts) */
  details: string;
  options: OptionSpec;
  run(ctx: CommandContext, args: ParsedArgs): Promise<CommandResult>;
}

const jobOptionsHelp = `  -p, --prompt <text>      the prompt (required)
  --agent <name>           agent to run (start: recorded on the session)
  --project-dir <path>     directory on the launcher's host to run in
  --parent <session>       parent session, told when this job ends (callback)
  --timeout <duration>     the job ends as timed_out after this long (exit 7)
  --wait                   block until the job is terminal; exit with its outcome;
                           progress on stderr when it is a terminal
  --wait-timeout <dur>     stop waiting after this long (implies --wait; exit 3 if
                           still running; the job keeps running)`;

/** Every command, in the order `--help` lists them. */
export const COMMANDS: Readonly<Record<string, CommandSpec>> = {
  start: {
    summary: 'start a new session with a prompt (prints the job descriptor)',
    usage: 'agentq start <session> -p <prompt> [--agent <name>] [--project-dir <path>] [--parent <session>] [--timeout <duration>] [--wait]',
    details: `${jobOptionsHelp}

Without --wait: prints the job descriptor (job_id, status, terminal, status_command,
cancel_command, poll_interval_ms, timeout_ms, ...) and exits 0 once the job is accepted.`,
    options: startOptions,
    run: (ctx, args) => createJob('start_session', ctx, args),
  },
  resume: {
    summary: 'send a new prompt to an existing session',
    usage: 'agentq resume <session> -p <prompt> [--timeout <duration>] [--wait]',
    details: jobOptionsHelp,
    options: startOptions,
    run: (ctx, args) => createJob('resume_session', ctx, args),
  },
  status: {
    summary: "one snapshot of a job; the exit code is the job's state",
    usage: 'agentq status <job_id>',
    details: '  exits 0 completed, 3 still running, 4 failed/interrupted, 5 not found, 6 stopped, 7 timed out',
    options: {},
    run: status,
  },
  wait: {
    summary: 'block until the first (or --all) of the jobs is terminal',
    usage: 'agentq wait <job_id...> [--all] [--timeout <duration>]',
    details: `  --all                    wait for every job (default: return when the first one ends)
  --timeout <duration>     stop waiting after this long (default: no limit); exit 3

Exit: 3 if the wait stopped before its condition; otherwise 0 if every finished job
completed, else the code of the first finished job (in argument order) that did not.
Unknown ids are listed in not_found and ignored; 5 if none of the ids exists.`,
    options: waitOptions,
    run: wait,
  },
  cancel: {
    summary: 'stop jobs; reports cancelled / stopping / already_completed / not_found per id',
    usage: 'agentq cancel <job_id...>',
    details: '  exits 0 when every id was known, 5 when any was not found',
    options: {},
    run: cancel,
  },
  list: {
    summary: 'jobs that are not terminal, newest first (--all: every job)',
    usage: 'agentq list [--all] [--status <s,...>] [--session <name>] [--launcher <id>] [--limit <n>] [--cursor <c>]',
    details: `  -a, --all                include terminal jobs
  --status <s,...>         only these statuses (e.g. failed,timed_out); implies --all
  --session <name>         only jobs of this session
  --launcher <id>          only jobs of this launcher
  --limit <n>              page size (1-1000, default 100)
  --cursor <c>             next page (the cursor the previous page printed)`,
    options: listOptions,
    run: list,
  },
  output: {
    summary: "a bounded preview of a job's output (--follow: stream until terminal)",
    usage: 'agentq output <job_id> [--tail <bytes>] [--follow]',
    details: `  --tail <bytes>           how many of the last bytes to show (default 16 KiB)
  -f, --follow             keep printing new output until the job is terminal, then
                           exit with its outcome like wait`,
    options: outputOptions,
    run: output,
  },
  launchers: {
    summary: 'registered launchers',
    usage: 'agentq launchers',
    details: '',
    options: {},
    run: launchers,
  },
  sessions: {
    summary: 'sessions, their state and last outcome',
    usage: 'agentq sessions [--status idle|busy] [--parent <session>]',
    details: `  --status idle|busy       only sessions in this state
  --parent <session>       only children of this session`,
    options: sessionsOptions,
    run: sessions,
  },
};

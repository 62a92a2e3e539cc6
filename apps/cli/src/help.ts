import { DEFAULT_URL } from './context.js';

/*
 * The parts of `--help` that commander does not write itself: what the exit codes mean, how to
 * write a duration, and the async-job workflow. Options and commands are listed by commander.
 */

export const EXIT_CODES_HELP = `Exit codes:
  0  completed (or the command worked: start without --wait, list, cancel, ...)
  1  coordinator unreachable, or internal error
  2  usage error (an empty id or --token too), or the coordinator refused the
     request (e.g. session_exists, or a missing/insufficient token)
  3  still running (not terminal): poll again or use agentq wait
  4  failed (includes interrupted)
  5  job not found (unknown or expired); for send, session stop, sessions <name>
     and launchers rm: the session or launcher does not exist
  6  stopped / cancelled
  7  timed out`;

export const DURATIONS_HELP = `Durations: 500ms, 30s, 5m, 1h, 1h30m, or plain milliseconds (1500); none = no limit.`;

export const ENVIRONMENT_HELP = `Environment:
  AGENTQ_URL               coordinator URL, or a comma list of coordinators (default ${DEFAULT_URL}); --url wins
  AGENTQ_TOKEN             bearer token; --token wins (an empty --token is an error)
  AGENTQ_CA_FILE           CA certificate for an https:// coordinator; --ca-file wins
  AGENTQ_SESSION_NAME      set by the launcher inside a job: the default --parent of start`;

export const MAIN_HELP_AFTER = `
Async jobs: 'agentq start' returns at once with a job descriptor; follow up with
'agentq wait <job_id>' (no polling) or 'agentq status <job_id>' (exit 3 while running).

${ENVIRONMENT_HELP}

${EXIT_CODES_HELP}

${DURATIONS_HELP}
Run 'agentq <command> --help' for a command's options. Docs: docs/cli.md`;

/** Text after a command's options: its own notes, then the exit codes. */
export function commandHelpAfter(details?: string): string {
  return `${details ? `\n${details}\n` : ''}\n${EXIT_CODES_HELP}`;
}

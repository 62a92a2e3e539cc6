import { COMMANDS } from './commands/index.js';

export const DEFAULT_URL = 'http://127.0.0.1:8765';

const GLOBAL_HELP = `Global options:
  --url <url>              coordinator URL (default: $AGENTQ_URL, else ${DEFAULT_URL})
  --json                   print exactly one JSON envelope on stdout:
                           {"ok":true,"data":...} or {"ok":false,"error":{"code","message"}}
  -h, --help               show help`;

export const EXIT_CODES_HELP = `Exit codes:
  0  completed (or the command worked: start without --wait, list, cancel, ...)
  1  coordinator unreachable, or internal error
  2  usage error, or the coordinator refused the request (e.g. session_exists)
  3  still running (not terminal): poll again or use agentq wait
  4  failed (includes interrupted)
  5  job not found (unknown or expired)
  6  stopped / cancelled
  7  timed out`;

const DURATIONS_HELP = `Durations: 500ms, 30s, 5m, 1h, 1h30m, or plain milliseconds (1500).`;

export function mainHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  const list = Object.entries(COMMANDS)
    .map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`)
    .join('\n');
  return `agentq: run AI-agent sessions through the agentq coordinator.

Usage: agentq <command> [options]

Commands:
${list}

Async jobs: 'agentq start' returns at once with a job descriptor; follow up with
'agentq wait <job_id>' (no polling) or 'agentq status <job_id>' (exit 3 while running).

${GLOBAL_HELP}

${EXIT_CODES_HELP}

${DURATIONS_HELP}
Run 'agentq <command> --help' for a command's options. Docs: docs/cli.md`;
}

export function commandHelp(name: string): string {
  const c = COMMANDS[name];
  if (!c) return mainHelp();
  return [`Usage: ${c.usage}`, '', c.summary, ...(c.details ? ['', c.details] : []), '', GLOBAL_HELP, '', EXIT_CODES_HELP].join(
    '\n',
  );
}
